#!/usr/bin/env python3
"""Speed of attnmt on real Multi30k batches, next to a plain tutorial-style reference in the same run.

For one config and one device it measures, for attnmt's model and for the reference
(benchmarks/reference_rnn.py or reference_transformer.py, built to the same layout and
parameter count; both sides report their parameters):

* training: whole steps (forward + loss + backward + clip + optimizer step, as attnmt.training
  does them; bf16 autocast on CUDA when train.amp is auto/bf16) over real batches built with
  attnmt's TextPipeline + make_batches, after warm-up; target and source+target tokens/s, and
  the wall time of one epoch (estimated from tokens/s, or measured with --full-epoch);
* decoding: sentences/s and target tokens/s of greedy and beam search on test_2016_flickr,
  through attnmt.decoding.decode_sources (tokenizing included), and of the search alone. The
  reference decodes attnmt's own weights (those of --decode-checkpoint, else attnmt's random
  init), copied in by its `from_attnmt`; both stop at eos within the same per-sentence budget.
  The mean output length of each side and the share of identical translations are reported;
* peak memory of each phase: torch.cuda.max_memory_allocated on CUDA; on CPU the process's
  peak RSS (VmHWM, reset per phase through /proc/self/clear_refs where Linux allows it).

Every attnmt figure is also given as a ratio attnmt / reference. On CUDA the clocks are read
after torch.cuda.synchronize(). With --repeats R the median of R measurements is reported.

    python benchmarks/bench.py --config configs/multi30k_rnn.yaml --device cpu \
        [--set model.dropout=0.3 ...] [--train-subset 3000] [--steps 30] [--warmup-steps 5] \
        [--decode-sentences 200] [--decode-checkpoint runs/multi30k_rnn] [--no-reference] \
        [--json bench.json]

Shapes: batch, src_len, tgt_len as in attnmt.data.batching; the reference is seq-first.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import logging
import os
import platform
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.config import Config, SearchConfig, load_config, load_saved_config
from attnmt.data.batching import Batch, make_batches, make_source_batch
from attnmt.data.corpus import ParallelCorpus, cache_dir, corpus_spec, load_corpus
from attnmt.data.pipeline import TextPipeline
from attnmt.errors import AttnmtError
from attnmt.graphs import make_train_step
from attnmt.models import build_model, count_parameters
from attnmt.search import output_budget
from attnmt.decoding import decode_sources, encode_sources, search_batch
from attnmt.training import (
    make_optimizer,
    make_step_schedule,
    resolve_device,
    seed_everything,
    train_step,
)

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # the references live next to this file, outside the package
    sys.path.insert(0, str(_HERE))

import reference_rnn  # noqa: E402
import reference_transformer  # noqa: E402

log = logging.getLogger("attnmt.bench")

SCHEMA = "attnmt-bench/1"
UNTRAINED_NOTE = ("decoding uses a randomly initialised model, which rarely emits <eos> and so decodes "
                  "to the length budget (max_len_ratio * src_len + max_len_offset, 2.0 * src_len + 10 by "
                  "default): decoding figures are a lower bound; pass --decode-checkpoint RUN_DIR for "
                  "realistic lengths")
StepFn = Callable[[Batch], Any]


# ----------------------------------------------------------------------------- clocks and memory

class Clock:
    """Wall clock that waits for queued CUDA work before it is read."""

    def __init__(self, device: torch.device):
        self.device = device

    def now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()


class PeakMemory:
    """Peak memory of one phase: CUDA allocated bytes, or the process's peak RSS on CPU.

    On Linux, writing "5" to /proc/self/clear_refs resets the peak RSS (VmHWM) to the current
    RSS, so each phase gets its own peak; elsewhere the peak since the process started
    (ru_maxrss) is all there is, and `kind` says so.
    """

    def __init__(self, device: torch.device):
        self.device = device
        if device.type == "cuda":
            self.kind = "cuda_max_memory_allocated"
        elif self._reset_rss():
            self.kind = "rss_peak_of_phase"
        else:
            self.kind = "rss_peak_since_start"
        self.start_mb = 0.0

    @staticmethod
    def _reset_rss() -> bool:
        try:
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")
            return True
        except OSError:
            return False

    @staticmethod
    def _status_mb(field: str) -> float | None:
        try:
            with open("/proc/self/status") as handle:
                for line in handle:
                    if line.startswith(field + ":"):
                        return int(line.split()[1]) / 1024  # kB -> MiB
        except OSError:
            pass
        return None

    def current_mb(self) -> float:
        if self.device.type == "cuda":
            return torch.cuda.memory_allocated(self.device) / 2**20
        rss = self._status_mb("VmRSS")
        return rss if rss is not None else self._maxrss_mb()

    @staticmethod
    def _maxrss_mb() -> float:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
        return peak / 2**20 if sys.platform == "darwin" else peak / 1024

    @staticmethod
    def _release_freed() -> None:
        """Return freed heap pages to the OS (glibc), so a phase's RSS growth is its own."""
        gc.collect()
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass

    def reset(self) -> None:
        """Start a phase."""
        if self.device.type != "cuda":
            self._release_freed()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        elif self.kind == "rss_peak_of_phase":
            self._reset_rss()
        self.start_mb = self.current_mb()

    def report(self) -> dict[str, float]:
        """Peak of the phase and its growth over the memory in use when the phase began (MiB)."""
        if self.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(self.device) / 2**20
        else:
            hwm = self._status_mb("VmHWM") if self.kind == "rss_peak_of_phase" else None
            peak = hwm if hwm is not None else self._maxrss_mb()
        return {"peak_mem_mb": round(peak, 1), "mem_growth_mb": round(max(peak - self.start_mb, 0.0), 1)}


# ----------------------------------------------------------------------------- data

@dataclass
class BenchData:
    """Everything the measurements share: the pipeline, training batches and test sentences."""

    pipeline: TextPipeline
    batches: list[Batch]            # one epoch of training batches, in training order
    epoch_tgt_tokens: int           # target tokens of a (full) epoch, <eos> included
    epoch_src_tokens: int
    epoch_estimated: bool           # True when scaled up from --train-subset
    train_pairs: int                # pairs the batches cover
    full_train_pairs: int
    sentences: list[str]            # source sentences to decode


def prepare_data(cfg: Config, *, train_subset: int | None, decode_split: str, decode_sentences: int | None,
                 pipeline: TextPipeline | None, spm_cache: Path) -> BenchData:
    """Build (or reuse) the pipeline and one epoch of batches exactly as attnmt.training does."""
    d, t = cfg.data, cfg.train
    spec = corpus_spec(d)
    corpus = load_corpus(spec, "train")
    full_pairs = len(corpus.src)
    if d.train_subset:  # the config's own subset: that *is* the epoch
        corpus = ParallelCorpus(corpus.src[: d.train_subset], corpus.tgt[: d.train_subset], corpus.name)
        full_pairs = len(corpus.src)
    if train_subset and train_subset < len(corpus.src):  # a benchmark shortcut: scale the epoch up
        corpus = ParallelCorpus(corpus.src[:train_subset], corpus.tgt[:train_subset], corpus.name)
    if pipeline is None:
        pipeline = TextPipeline.build(d, corpus, cache_dir=spm_cache)
    examples = pipeline.encode_corpus(corpus, max_len=d.max_len)
    vocab = pipeline.tgt_vocab
    batches = make_batches(examples, batch_size=t.batch_size, batch_by=t.batch_by, shuffle=True, seed=t.seed,
                           epoch=1, pad_id=vocab.pad_id, bos_id=vocab.bos_id, eos_id=vocab.eos_id)
    tgt_tokens = sum(b.num_tgt_tokens for b in batches)
    src_tokens = sum(int(b.src_lengths.sum()) for b in batches)
    scale = full_pairs / len(corpus.src)
    sentences = load_corpus(spec, decode_split).src
    if decode_sentences:
        sentences = sentences[:decode_sentences]
    return BenchData(pipeline, batches, round(tgt_tokens * scale), round(src_tokens * scale), scale != 1.0,
                     len(examples), full_pairs, list(sentences))


def batch_tokens(batch: Batch) -> tuple[int, int]:
    """(target tokens, source tokens) of a batch, counted on the CPU."""
    return batch.num_tgt_tokens, int(batch.src_lengths.sum())


# ----------------------------------------------------------------------------- train steps

def make_attnmt_step(model: nn.Module, cfg: Config, device: torch.device, pad_id: int) -> StepFn:
    """One whole training step exactly as in attnmt.training.train (loss sum / tokens, clip,
    the non-finite guard with its host sync, optimizer and schedule step)."""
    t = cfg.train
    optimizer = make_optimizer(model, t)
    schedule = make_step_schedule(optimizer, t)
    use_amp = device.type == "cuda" and t.amp in ("auto", "bf16")
    # train.compile (--set train.compile=default|cudagraphs): the step the training loop would use
    update = make_train_step(t.compile, model, optimizer, schedule, train_cfg=t, use_amp=use_amp, pad_id=pad_id,
                             eager=train_step)

    def step(batch: Batch) -> Tensor:
        loss, _ = update(batch.to(device))
        return loss

    return step


def make_reference_step(model: nn.Module, cfg: Config, device: torch.device, pad_id: int) -> StepFn:
    """The tutorial's training step: seq-first batches, mean cross-entropy, clip, a plain
    (non-fused) Adam/AdamW, and ``loss.item()`` every step."""
    t = cfg.train
    cls = torch.optim.AdamW if t.optimizer == "adamw" else torch.optim.Adam
    optimizer = cls(model.parameters(), lr=t.lr, betas=t.betas, weight_decay=t.weight_decay)

    def step(batch: Batch) -> float:
        src = batch.src_ids.t().to(device)  # (src_len, batch)
        tgt_in = batch.tgt_in.t().to(device)  # (tgt_len, batch)
        tgt_out = batch.tgt_out.t().to(device)  # (tgt_len, batch)
        optimizer.zero_grad()
        logits = model(src, tgt_in, t.teacher_forcing)  # (tgt_len, batch, vocab)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=pad_id,
                               label_smoothing=t.label_smoothing)
        loss.backward()
        if t.clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), t.clip)
        optimizer.step()
        return loss.item()

    return step


def measure_training(step: StepFn, batches: Sequence[Batch], *, warmup: int, steps: int, repeats: int,
                     full_epoch: bool, epoch_tgt_tokens: int, clock: Clock, memory: PeakMemory) -> dict:
    """Throughput of `steps` whole steps after `warmup` (batches taken in order, cycling).

    The window is timed as a whole (one clock read, with a CUDA sync, at each end); with
    `repeats` > 1 the same batches run again and the median throughput is reported.
    """
    memory.reset()
    for i in range(warmup):
        step(batches[i % len(batches)])
    measured = [batches[(warmup + i) % len(batches)] for i in range(steps)]
    tgt = sum(batch_tokens(b)[0] for b in measured)
    src = sum(batch_tokens(b)[1] for b in measured)
    seconds = []
    for _ in range(repeats):
        start = clock.now()
        for batch in measured:
            step(batch)
        seconds.append(clock.now() - start)
    sec = statistics.median(seconds)
    result = {
        "warmup_steps": warmup, "steps": steps, "repeats": repeats, "tgt_tokens": tgt, "src_tokens": src,
        "seconds": round(sec, 4), "step_ms": round(1e3 * sec / max(steps, 1), 2),
        "tgt_tok_per_s": round(tgt / sec, 1), "src_tgt_tok_per_s": round((src + tgt) / sec, 1),
        "epoch_s_estimate": round(epoch_tgt_tokens * sec / tgt, 2),
        "epoch_s_measured": None,
    }
    if full_epoch:
        start = clock.now()
        for batch in batches:
            step(batch)
        result["epoch_s_measured"] = round(clock.now() - start, 2)
        result["epoch_batches"] = len(batches)
    result.update(memory.report())
    return result


# ----------------------------------------------------------------------------- decoding

def budget(src_len: int, search_cfg: SearchConfig) -> int:
    """The length budget attnmt's search gives a source of `src_len` tokens (eos included)."""
    return int(output_budget(torch.tensor([src_len]), search_cfg.max_len_ratio, search_cfg.max_len_offset)[0])


def attnmt_search_only(model: nn.Module, pipeline: TextPipeline, sentences: Sequence[str], *, beam: int,
                       search_cfg: SearchConfig, device: torch.device, batch_size: int) -> Callable[[], int]:
    """A callable that runs only the search over the batches decode_sources would build
    (length-sorted, already on the device); it returns the tokens produced."""
    _, ids = encode_sources(pipeline, sentences, search_cfg)
    order = sorted((i for i in range(len(ids)) if ids[i]), key=lambda i: len(ids[i]))
    pad_id, vocab = pipeline.src_vocab.pad_id, pipeline.tgt_vocab
    batches = [make_source_batch([ids[i] for i in order[s:s + batch_size]], pad_id=pad_id).to(device)
               for s in range(0, len(order), batch_size)]

    def run() -> int:
        produced = 0
        for b in batches:
            found = search_batch(model, b, beam_size=beam, length_penalty=search_cfg.length_penalty,
                                 search_cfg=search_cfg, bos_id=vocab.bos_id, eos_id=vocab.eos_id)
            produced += sum(len(tokens) for tokens in found.tokens)
        return produced

    return run


def reference_translate(ref: ModuleType, model: nn.Module, pipeline: TextPipeline, sentences: Sequence[str], *,
                        beam: int, search_cfg: SearchConfig, device: torch.device, batch_size: int,
                        search_only: bool = False) -> Callable[[], Any]:
    """A callable that translates like the tutorials: greedy in batches in input order until every
    sentence of the batch has emitted eos or reached its budget, beam search one sentence at a
    time (finished hypotheses scored with attnmt's GNMT penalty, search.length_penalty); it returns
    the output tokens of each sentence.

    Budgets are attnmt's (`budget`: max_len_ratio * src_len + max_len_offset tokens, eos included),
    one per sentence. With `search_only`, tokenizing and detokenizing happen once, outside the
    callable, which then returns the number of tokens produced.
    """
    vocab = pipeline.tgt_vocab

    def prepare() -> list[tuple[Tensor, list[int]]]:
        ids = [s for s in encode_sources(pipeline, sentences, search_cfg)[1] if s]
        if beam <= 1:
            chunks = [ids[s:s + batch_size] for s in range(0, len(ids), batch_size)]
            return [(make_source_batch(c, pad_id=pipeline.src_vocab.pad_id).src_ids.t().to(device),  # (src_len, batch)
                     [budget(len(x), search_cfg) for x in c]) for c in chunks]
        return [(torch.tensor(s, dtype=torch.long, device=device).unsqueeze(1), [budget(len(s), search_cfg)])
                for s in ids]  # (src_len, 1)

    def search(inputs: list[tuple[Tensor, list[int]]]) -> list[list[int]]:
        outputs = []
        for src, max_lens in inputs:
            if beam <= 1:
                rows = ref.greedy_decode(model, src, max(max_lens), vocab.bos_id, vocab.eos_id,
                                         torch.tensor(max_lens, device=device)).t().tolist()  # (batch, steps)
                rows = [row[:n] for row, n in zip(rows, max_lens)]
                outputs += [row[: row.index(vocab.eos_id)] if vocab.eos_id in row else row for row in rows]
            else:
                outputs.append(ref.beam_search_one(model, src, beam_size=beam, max_len=max_lens[0],
                                                   bos_id=vocab.bos_id, eos_id=vocab.eos_id,
                                                   length_penalty=search_cfg.length_penalty))
        return outputs

    if search_only:
        inputs = prepare()
        return lambda: sum(len(o) for o in search(inputs))

    def run() -> list[list[str]]:
        outputs = search(prepare())
        for out in outputs:
            pipeline.decode_target(out)  # the text, as decode_sources makes it
        return [vocab.decode(out, strip_special=False) for out in outputs]  # tokens as decode_sources keeps them

    return run


def measure_decoding(run: Callable[[], list[list[str]]], search_run: Callable[[], int] | None, n_sentences: int, *,
                     repeats: int, clock: Clock, memory: PeakMemory) -> tuple[dict, list[list[str]]]:
    """Sentences/s, produced target tokens/s (median of `repeats`), with and without tokenizing,
    and the mean output length; returns the figures and the output tokens of each sentence."""
    memory.reset()
    seconds, outputs = [], []
    for _ in range(repeats):
        start = clock.now()
        outputs = run()
        seconds.append(clock.now() - start)
    sec = statistics.median(seconds)
    tokens = sum(len(o) for o in outputs)
    result = {"sentences": n_sentences, "tgt_tokens": tokens, "mean_len": round(tokens / max(len(outputs), 1), 2),
              "seconds": round(sec, 4), "sent_per_s": round(n_sentences / sec, 2),
              "tgt_tok_per_s": round(tokens / sec, 1)}
    if search_run is not None:
        search_seconds = []
        for _ in range(repeats):
            start = clock.now()
            search_run()
            search_seconds.append(clock.now() - start)
        ssec = statistics.median(search_seconds)
        result.update(search_seconds=round(ssec, 4), search_sent_per_s=round(n_sentences / ssec, 2),
                      search_tgt_tok_per_s=round(tokens / ssec, 1))
    result.update(memory.report())
    return result, outputs


def agreement(a: Sequence[Sequence[str]], b: Sequence[Sequence[str]]) -> float | None:
    """Share of sentences whose two outputs are token for token the same (None: not aligned)."""
    if len(a) != len(b) or not a:
        return None
    return round(sum(list(x) == list(y) for x, y in zip(a, b)) / len(a), 4)


# ----------------------------------------------------------------------------- the run

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=None, help="YAML config (default: the config of --decode-checkpoint)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, as in attnmt train (repeatable)")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: train.num_threads)")
    p.add_argument("--batch-size", type=int, default=None, help="override train.batch_size")
    p.add_argument("--train-subset", type=int, default=None,
                   help="build the pipeline and batches from the first N training pairs only "
                        "(the epoch estimate is scaled up to the whole corpus)")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--steps", type=int, default=30, help="measured training steps")
    p.add_argument("--repeats", type=int, default=1, help="repeat each measurement; the median is reported")
    p.add_argument("--full-epoch", action="store_true", help="also time one whole epoch")
    p.add_argument("--decode-split", default="test_2016_flickr")
    p.add_argument("--decode-sentences", type=int, default=None, help="decode only the first N sentences")
    p.add_argument("--decode-batch-size", type=int, default=64)
    p.add_argument("--beams", type=int, nargs="+", default=[1, 5], help="beam sizes to time (1 = greedy)")
    p.add_argument("--decode-checkpoint", default=None, metavar="RUN_DIR",
                   help="decode with this trained run (realistic output lengths)")
    p.add_argument("--no-decode", action="store_true", help="skip decoding")
    p.add_argument("--no-train", action="store_true", help="skip training")
    p.add_argument("--no-search-only", action="store_true", help="skip timing the search alone")
    ref = p.add_mutually_exclusive_group()
    ref.add_argument("--reference", dest="reference", action="store_true", default=True,
                     help="also measure the tutorial-style reference (default)")
    ref.add_argument("--no-reference", dest="reference", action="store_false")
    p.add_argument("--spm-cache", default=None, help="folder for sentencepiece models (default: the attnmt cache)")
    p.add_argument("--json", default=None, metavar="PATH", help="write the results as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no table")
    return p


def load_bench_config(args: argparse.Namespace) -> tuple[Config, str]:
    overrides = list(args.overrides)
    if args.batch_size is not None:
        overrides.append(f"train.batch_size={args.batch_size}")
    if args.config:
        return load_config(args.config, overrides), args.config
    if not args.decode_checkpoint:
        raise AttnmtError("bench needs --config CONFIG (or --decode-checkpoint RUN_DIR)")
    from attnmt.config import apply_overrides, config_from_dict

    path = Path(args.decode_checkpoint) / "config.json"
    raw = apply_overrides(load_saved_config(path).to_dict(), overrides, source=str(path))
    return config_from_dict(raw, source=str(path)), str(path)


def reference_module(arch: str) -> ModuleType:
    return reference_rnn if arch == "rnn" else reference_transformer


def run_bench(args: argparse.Namespace) -> dict:
    """Every measurement of one invocation; returns the JSON-ready report."""
    cfg, config_source = load_bench_config(args)
    threads = args.threads or cfg.train.num_threads
    previous_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        return _run_bench(args, cfg, config_source)
    finally:
        torch.set_num_threads(previous_threads)  # callers (tests, attnmt bench) keep their setting


def _run_bench(args: argparse.Namespace, cfg: Config, config_source: str) -> dict:
    device = resolve_device(args.device)
    clock, memory = Clock(device), PeakMemory(device)
    notes: list[str] = []

    translator = None
    if args.decode_checkpoint:
        from attnmt.translator import Translator

        translator = Translator.load(args.decode_checkpoint, device=str(device))
    reuse = translator.pipeline if translator is not None and not args.config else None
    spm_cache = Path(args.spm_cache) if args.spm_cache else cache_dir() / "spm"
    t0 = time.perf_counter()
    data = prepare_data(cfg, train_subset=args.train_subset, decode_split=args.decode_split,
                        decode_sentences=args.decode_sentences, pipeline=reuse, spm_cache=spm_cache)
    log.info("data ready in %.1f s: %d batches, %d sentences to decode", time.perf_counter() - t0,
             len(data.batches), len(data.sentences))
    pipeline, vocab = data.pipeline, data.pipeline.tgt_vocab
    if data.epoch_estimated:
        notes.append(f"epoch token counts scaled from --train-subset {args.train_subset} to "
                     f"{data.full_train_pairs} pairs")
    if device.type == "cpu" and memory.kind != "cuda_max_memory_allocated":
        notes.append("CPU memory is the whole process's RSS (data, both models): compare mem_growth_mb")
    ref = reference_module(cfg.model.arch)
    sides = ["attnmt"] + (["reference"] if args.reference else [])
    same_outputs: dict[str, float | None] = {}
    results: dict[str, dict] = {side: {} for side in sides}

    def fresh(side: str, src_vocab: int, tgt_vocab: int) -> nn.Module:
        seed_everything(cfg.train.seed)
        if side == "attnmt":
            return build_model(cfg.model, src_vocab, tgt_vocab, pad_id=vocab.pad_id, bos_id=vocab.bos_id,
                               eos_id=vocab.eos_id).to(device)
        return ref.build_reference(cfg.model, src_vocab, tgt_vocab, pad_id=vocab.pad_id).to(device)

    if not args.no_train:
        use_amp = device.type == "cuda" and cfg.train.amp in ("auto", "bf16")
        for side in sides:
            model = fresh(side, len(pipeline.src_vocab), len(vocab)).train()
            make = make_attnmt_step if side == "attnmt" else make_reference_step
            step = make(model, cfg, device, vocab.pad_id)
            log.info("training %s (%.1fM parameters)", side, count_parameters(model) / 1e6)
            results[side]["params"] = count_parameters(model)
            results[side]["train"] = measure_training(
                step, data.batches, warmup=args.warmup_steps, steps=args.steps, repeats=args.repeats,
                full_epoch=args.full_epoch, epoch_tgt_tokens=data.epoch_tgt_tokens, clock=clock, memory=memory)
            results[side]["train"]["amp"] = "bf16" if use_amp and side == "attnmt" else "fp32"
            del model, step

    if not args.no_decode and data.sentences:
        search_cfg = translator.cfg.search if translator is not None else cfg.search
        dec_pipeline = translator.pipeline if translator is not None else pipeline
        if translator is None:
            notes.append(UNTRAINED_NOTE)
            attnmt_model = fresh("attnmt", len(dec_pipeline.src_vocab), len(dec_pipeline.tgt_vocab))
        else:
            attnmt_model = translator.model
        if args.reference:  # the reference decodes attnmt's very weights: one model, two codes
            notes.append("the reference decodes attnmt's weights (" + ("trained, from --decode-checkpoint"
                         if translator is not None else "random init") + "), mapped by from_attnmt; both stop at "
                         "<eos> within attnmt's length budget; same_outputs = share of identical translations")
        outputs: dict[str, dict[str, list[list[str]]]] = {side: {} for side in sides}
        for side in sides:
            if side == "attnmt":
                model = attnmt_model
            else:
                try:
                    model = ref.from_attnmt(attnmt_model)
                except ValueError as err:  # e.g. Luong attention: the reference has no such layer
                    notes.append(f"the reference cannot hold this model's weights ({err}); it decodes its own "
                                 "random weights, so its decoding figures are not comparable")
                    model = fresh(side, len(dec_pipeline.src_vocab), len(dec_pipeline.tgt_vocab))
            model.eval()
            results[side]["decode_params"] = count_parameters(model)
            results[side]["decode"] = {}
            for beam in args.beams:
                log.info("decoding %s, beam %d", side, beam)
                kw = dict(beam=beam, search_cfg=search_cfg, device=device, batch_size=args.decode_batch_size)
                if side == "attnmt":
                    def run(beam: int = beam) -> list[list[str]]:
                        found = decode_sources(model, dec_pipeline, data.sentences, beam_size=beam,
                                               search_cfg=search_cfg, device=device,
                                               batch_size=args.decode_batch_size)
                        return [r.tokens for r in found if r.source_tokens]

                    search_run = None if args.no_search_only else attnmt_search_only(model, dec_pipeline,
                                                                                     data.sentences, **kw)
                else:
                    run = reference_translate(ref, model, dec_pipeline, data.sentences, **kw)
                    search_run = (None if args.no_search_only else
                                  reference_translate(ref, model, dec_pipeline, data.sentences, search_only=True, **kw))
                name = "greedy" if beam <= 1 else f"beam{beam}"
                figures, outputs[side][name] = measure_decoding(
                    run, search_run, len(data.sentences), repeats=args.repeats, clock=clock, memory=memory)
                results[side]["decode"][name] = {"beam": beam, **figures}
        if args.reference:
            same_outputs = {name: agreement(outputs["attnmt"][name], outputs["reference"].get(name, []))
                            for name in outputs["attnmt"]}

    report = {
        "schema": SCHEMA,
        "same_outputs": same_outputs,
        "config": config_source,
        "overrides": list(args.overrides),
        "arch": cfg.model.arch,
        "env": environment(device),
        "data": {
            "train_pairs": data.train_pairs, "full_train_pairs": data.full_train_pairs,
            "train_subset": args.train_subset, "batch_size": cfg.train.batch_size, "batch_by": cfg.train.batch_by,
            "batches_per_epoch": len(data.batches), "epoch_tgt_tokens": data.epoch_tgt_tokens,
            "epoch_src_tokens": data.epoch_src_tokens, "epoch_estimated": data.epoch_estimated,
            "src_vocab": len(pipeline.src_vocab), "tgt_vocab": len(vocab),
            "decode_split": args.decode_split, "decode_sentences": len(data.sentences),
            "decode_checkpoint": args.decode_checkpoint,
        },
        "memory_kind": memory.kind,
        "results": results,
        "ratios": ratios(results["attnmt"], results["reference"]) if args.reference else {},
        "notes": notes,
    }
    return report


def environment(device: torch.device) -> dict:
    env = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "python": platform.python_version(),
           "torch": torch.__version__, "platform": platform.platform(), "device": str(device),
           "threads": torch.get_num_threads(), "cpu_count": os.cpu_count()}
    if device.type == "cuda":
        env["device_name"] = torch.cuda.get_device_name(device)
    else:
        env["device_name"] = platform.processor() or platform.machine()
    return env


def _numbers(tree: dict, prefix: str = "") -> dict[str, float]:
    """Flatten nested results to dotted keys -> numbers (bools and counts of work excluded)."""
    skip = {"warmup_steps", "steps", "repeats", "tgt_tokens", "src_tokens", "sentences", "beam", "epoch_batches",
            "params", "decode_params", "mean_len"}
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_numbers(value, f"{prefix}{key}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and key not in skip:
            out[prefix + key] = float(value)
    return out


def ratios(attnmt: dict, reference: dict) -> dict[str, float | None]:
    """attnmt / reference for every figure both have: > 1 is faster for rates (…_per_s), and
    < 1 is better for seconds and memory."""
    a, r = _numbers(attnmt), _numbers(reference)
    return {key: (round(a[key] / r[key], 3) if r[key] else None) for key in a if key in r}


# ----------------------------------------------------------------------------- output

ROWS = [  # (label, dotted key); rows a run lacks are left out
    ("train tgt tok/s", "train.tgt_tok_per_s"),
    ("train src+tgt tok/s", "train.src_tgt_tok_per_s"),
    ("train ms/step", "train.step_ms"),
    ("epoch s (estimate)", "train.epoch_s_estimate"),
    ("epoch s (measured)", "train.epoch_s_measured"),
    ("train peak mem MiB", "train.peak_mem_mb"),
    ("train mem growth MiB", "train.mem_growth_mb"),
]


def _lengths(results: dict) -> dict[str, float]:
    """decode.NAME.mean_len -> mean output length (left out of the ratios: it is work, not speed)."""
    return {f"decode.{name}.mean_len": float(d["mean_len"]) for name, d in results.get("decode", {}).items()}


def format_table(report: dict) -> str:
    res = report["results"]
    has_ref = "reference" in res
    rows = list(ROWS)
    for name in res["attnmt"].get("decode", {}):
        rows += [(f"{name} sent/s", f"decode.{name}.sent_per_s"),
                 (f"{name} mean output len", f"decode.{name}.mean_len"),
                 (f"{name} tgt tok/s", f"decode.{name}.tgt_tok_per_s"),
                 (f"{name} search-only sent/s", f"decode.{name}.search_sent_per_s"),
                 (f"{name} peak mem MiB", f"decode.{name}.peak_mem_mb")]
    a = _numbers(res["attnmt"]) | _lengths(res["attnmt"])
    r = (_numbers(res["reference"]) | _lengths(res["reference"])) if has_ref else {}
    d, env = report["data"], report["env"]
    lines = [f"attnmt bench: {report['config']} ({report['arch']}) on {env['device']} ({env['device_name']}, "
             f"torch {env['torch']}, {env['threads']} threads)",
             f"data: {d['train_pairs']} train pairs in {d['batches_per_epoch']} batches of {d['batch_size']} "
             f"{d['batch_by']}; epoch {d['epoch_tgt_tokens']:,} tgt tokens"
             f"{' (scaled)' if d['epoch_estimated'] else ''}; decode {d['decode_sentences']} sentences",
             "", f"{'':26}{'attnmt':>14}" + (f"{'reference':>14}{'ratio':>9}" if has_ref else "")]
    params = [res[side].get("params", res[side].get("decode_params")) for side in ("attnmt", "reference")
              if side in res]
    if params[0] is not None:
        lines.append(f"{'parameters':26}{params[0]:>14,}" + (f"{params[1]:>14,}" if has_ref else ""))
    for label, key in rows:
        if key not in a:
            continue
        line = f"{label:26}{a[key]:>14,.1f}"
        if has_ref and key in r:
            ratio = report["ratios"].get(key)
            line += f"{r[key]:>14,.1f}" + (f"{ratio:>8.2f}x" if ratio is not None else f"{'-':>9}")
        lines.append(line)
    lines.append("ratio = attnmt / reference (rates: higher is faster; seconds, memory: lower is better)"
                 if has_ref else "")
    for name, share in report.get("same_outputs", {}).items():
        if share is not None:
            lines.append(f"{name}: {100 * share:.1f}% of the sentences get the same translation from both")
    lines += [f"note: {n}" for n in report["notes"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python benchmarks/bench.py ...` (later `attnmt bench ...`); returns the exit code."""
    args = build_parser().parse_args(argv)
    if min(args.steps, *args.beams, args.repeats, args.decode_batch_size) < 1 or args.warmup_steps < 0:
        print("bench: error: --steps, --beams, --repeats and --decode-batch-size must be >= 1, "
              "--warmup-steps >= 0", file=sys.stderr)
        return 2
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    try:
        report = run_bench(args)
    except AttnmtError as err:
        print(f"bench: error: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(format_table(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
