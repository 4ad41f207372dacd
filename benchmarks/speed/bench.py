#!/usr/bin/env python3
"""Speed of attnmt on real Multi30k batches, next to a plain tutorial-style reference in the same run.

For one config and one device it measures, for attnmt's model and for the reference
(benchmarks/references/reference_rnn.py or reference_transformer.py, built to the same layout and
parameter count; both sides report their parameters):

* training (train_speed.py): whole steps (forward + loss + backward + clip + optimizer step, as
  attnmt.training does them; bf16 autocast when train.amp asks for it) over real batches built with
  attnmt's TextPipeline + make_batches, after warm-up; target and source+target tokens/s, and
  the wall time of one epoch (estimated from tokens/s, or measured with --full-epoch);
* decoding (decode_speed.py): sentences/s and target tokens/s of greedy and beam search on
  test_2016_flickr, through attnmt.Translator (tokenizing included), and of the search alone. The
  reference decodes attnmt's own weights (those of --decode-checkpoint, else attnmt's random
  init), copied in by its `from_attnmt`; both stop at eos within the same per-sentence budget.
  The mean output length of each side and the share of identical translations are reported;
* peak memory of each phase (memory.py): torch.cuda.max_memory_allocated on CUDA; on CPU the
  process's peak RSS (VmHWM, reset per phase through /proc/self/clear_refs where Linux allows it).

Every attnmt row also gives each figure as a ratio attnmt / reference. On CUDA the clocks are read
after torch.cuda.synchronize(). With --repeats R the median of R measurements is reported. The
JSON report has the schema of benchmarks/common.py: one row per side and phase (kind "train" or
"decode").

    benchmarks/speed/bench.py --config configs/multi30k_rnn.yaml --device cpu \\
        [--set model.dropout=0.3 ...] [--train-subset 3000] [--steps 30] [--warmup-steps 5] \\
        [--decode-sentences 200] [--decode-checkpoint runs/multi30k_rnn] [--no-reference] \\
        [--json bench.json]

Shapes: batch, src_len, tgt_len as in attnmt.data.batching; the reference is seq-first.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
from torch import nn

from attnmt import Translator
from attnmt.config import Config, apply_overrides, config_from_dict, load_config, load_saved_config
from attnmt.data.batching import Batch
from attnmt.data.corpus import corpus_spec, load_corpus
from attnmt.data.epochs import Batching, Epoch
from attnmt.data.pipeline import TextPipeline, pipeline_difference
from attnmt.data.prepare import prepare
from attnmt.devices import resolve_device
from attnmt.errors import AttnmtError
from attnmt.models import build_model, count_parameters
from attnmt.training.trainable import use_bf16
from benchmarks.common import command, environment, make_report, run_main, torch_threads
from benchmarks.references import reference_rnn, reference_transformer
from benchmarks.speed.ceiling import product_throughput, train_work
from benchmarks.speed.decode_speed import (
    agreement,
    attnmt_search_only,
    attnmt_translate,
    measure_decoding,
    reference_translate,
)
from benchmarks.speed.memory import PeakMemory
from benchmarks.speed.train_speed import make_attnmt_step, make_reference_step, measure_training

log = logging.getLogger("attnmt.bench")

UNTRAINED_NOTE = ("decoding uses a randomly initialised model, which rarely emits <eos> and so decodes "
                  "to the length budget (max_len_ratio * src_len + max_len_offset, 2.0 * src_len + 10 by "
                  "default): decoding figures are a lower bound; pass --decode-checkpoint RUN_DIR for "
                  "realistic lengths")
# Counts of work, not speed: left out of the ratios.
NOT_RATIOS = {"warmup_steps", "steps", "repeats", "tgt_tokens", "src_tokens", "sentences", "outputs", "beam",
              "epoch_batches", "params", "mean_len", "macs_per_tgt_token", "gemm_gmac_per_s",
              "limit_tgt_tok_per_s", "limit_batches"}
LIMIT_BATCHES = 4  # training batches whose multiply-adds and products are counted for the limit


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
                 pipeline: TextPipeline | None) -> BenchData:
    """The prepared training data (data.prepare, from the cache when it is there) and epoch 1's
    batches exactly as attnmt.training plans them (data.epochs); with `train_subset`, the first
    batches of the epoch that hold at most that many pairs (one at least), and the epoch's token
    counts scaled up.

    Raises:
        AttnmtError: `pipeline` (a --decode-checkpoint run's) is not the prepared data's.
    """
    d, t = cfg.data, cfg.train
    prepared = prepare(d)
    if pipeline is not None and (problem := pipeline_difference(pipeline, prepared.pipeline)):
        raise AttnmtError(f"the run's pipeline is not the one its config prepares: {problem}")
    vocab = prepared.pipeline.tgt_vocab
    epoch = Epoch(prepared, [c.weight for c in d.train_corpora()] or [1.0],
                  Batching(t.batch_size, t.batch_by, window=t.length_window, seed=t.seed, pad_id=vocab.pad_id,
                           bos_id=vocab.bos_id, eos_id=vocab.eos_id), 1)
    planned = list(epoch.batches())
    full_pairs, chosen, pairs = len(epoch), [], 0
    for examples in planned:
        if train_subset and chosen and pairs + len(examples) > train_subset:
            break
        chosen.append(examples)
        pairs += len(examples)
    batches = [epoch.build(examples) for examples in chosen]
    tgt_tokens = sum(b.num_tgt_tokens for b in batches)
    src_tokens = sum(int(b.src_lengths.sum()) for b in batches)
    scale = full_pairs / pairs
    sentences = load_corpus(corpus_spec(d), decode_split).src
    if decode_sentences:
        sentences = sentences[:decode_sentences]
    return BenchData(prepared.pipeline, batches, round(tgt_tokens * scale), round(src_tokens * scale), scale != 1.0,
                     pairs, full_pairs, list(sentences))


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
    p.add_argument("--no-limit", action="store_true",
                   help="skip measuring this machine's training limit (benchmarks/speed/ceiling.py; CPU, fp32 only)")
    ref = p.add_mutually_exclusive_group()
    ref.add_argument("--reference", dest="reference", action="store_true", default=True,
                     help="also measure the tutorial-style reference (default)")
    ref.add_argument("--no-reference", dest="reference", action="store_false")
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
    path = Path(args.decode_checkpoint) / "config.json"
    raw = apply_overrides(load_saved_config(path).to_dict(), overrides, source=str(path))
    return config_from_dict(raw, source=str(path)), str(path)


def reference_module(arch: str) -> ModuleType:
    return reference_rnn if arch == "rnn" else reference_transformer


@dataclass
class BenchRun:
    """One invocation's shared state: what was asked, the device, the data, and the notes so far."""

    args: argparse.Namespace
    cfg: Config
    device: torch.device
    memory: PeakMemory
    data: BenchData
    translator: Translator | None
    sides: list[str]
    notes: list[str] = field(default_factory=list)

    def fresh(self, side: str, src_vocab: int, tgt_vocab: int) -> nn.Module:
        """A newly initialised model of one side, seeded as training seeds it."""
        vocab = self.data.pipeline.tgt_vocab
        torch.manual_seed(self.cfg.train.seed)
        if side == "attnmt":
            return build_model(self.cfg.model, src_vocab, tgt_vocab, pad_id=vocab.pad_id, bos_id=vocab.bos_id,
                               eos_id=vocab.eos_id).to(self.device)
        return reference_module(self.cfg.model.arch).build_reference(self.cfg.model, src_vocab, tgt_vocab,
                                                                      pad_id=vocab.pad_id).to(self.device)


def train_rows(run: BenchRun) -> list[dict]:
    """One "train" row per side."""
    pipeline, args = run.data.pipeline, run.args
    rows = []
    for side in run.sides:
        model = run.fresh(side, len(pipeline.src_vocab), len(pipeline.tgt_vocab)).train()
        make = make_attnmt_step if side == "attnmt" else make_reference_step
        step = make(model, run.cfg, run.device, pipeline.tgt_vocab.pad_id)
        log.info("training %s (%.1fM parameters)", side, count_parameters(model) / 1e6)
        figures = measure_training(step, run.data.batches, warmup=args.warmup_steps, steps=args.steps,
                                   repeats=args.repeats, full_epoch=args.full_epoch,
                                   epoch_tgt_tokens=run.data.epoch_tgt_tokens, device=run.device, memory=run.memory)
        amp = "bf16" if side == "attnmt" and use_bf16(run.cfg, run.device) else "fp32"
        if not args.no_limit and amp == "fp32" and run.device.type == "cpu":
            figures.update(train_limit(step, run.data.batches[args.warmup_steps:][:LIMIT_BATCHES] or run.data.batches,
                                       figures["tgt_tok_per_s"]))
        rows.append({"kind": "train", "side": side, "params": count_parameters(model), "amp": amp, **figures})
        del model, step
    return rows


def train_limit(step, batches: list[Batch], tgt_tok_per_s: float) -> dict:
    """This machine's limit for these training steps and the share of it reached (ceiling.py):
    the steps' multiply-adds per target token, torch's fp32 GMAC/s at their own matrix products.
    Counting runs more updates, so it comes after the timing."""
    work = train_work(step, batches)
    gemm = product_throughput(work.shapes)
    limit = gemm["fp32_gmac_per_s"] * 1e9 / work.macs_per_tgt_token
    return {"macs_per_tgt_token": round(work.macs_per_tgt_token), "gemm_gmac_per_s": gemm["fp32_gmac_per_s"],
            "limit_batches": len(batches), "limit_tgt_tok_per_s": round(limit),
            "share_of_limit": round(tgt_tok_per_s / limit, 4)}


def decode_models(run: BenchRun) -> tuple[Translator, dict[str, nn.Module]]:
    """The translator attnmt decodes with, and each side's model (the reference with attnmt's weights)."""
    if run.translator is not None:
        translator = run.translator
    else:
        run.notes.append(UNTRAINED_NOTE)
        pipeline = run.data.pipeline
        model = run.fresh("attnmt", len(pipeline.src_vocab), len(pipeline.tgt_vocab))
        translator = Translator(model, pipeline, run.cfg, device=run.device)
    models = {"attnmt": translator.model}
    if "reference" in run.sides:  # the reference decodes attnmt's very weights: one model, two codes
        run.notes.append("the reference decodes attnmt's weights (" + ("trained, from --decode-checkpoint"
                         if run.translator is not None else "random init") + "), mapped by from_attnmt; both stop "
                         "at <eos> within attnmt's length budget; same_outputs = share of identical translations")
        try:
            models["reference"] = reference_module(run.cfg.model.arch).from_attnmt(translator.model)
        except ValueError as err:  # e.g. Luong attention: the reference has no such layer
            run.notes.append(f"the reference cannot hold this model's weights ({err}); it decodes its own "
                             "random weights, so its decoding figures are not comparable")
            pipeline = translator.pipeline
            models["reference"] = run.fresh("reference", len(pipeline.src_vocab), len(pipeline.tgt_vocab))
    return translator, models


def decode_rows(run: BenchRun) -> list[dict]:
    """One "decode" row per side and beam size; attnmt's rows say how many translations the
    reference shares with them."""
    args, sentences = run.args, run.data.sentences
    translator, models = decode_models(run)
    pipeline, search_cfg = translator.pipeline, translator.cfg.search
    ref = reference_module(run.cfg.model.arch)
    rows, outputs = [], {}
    for side, model in models.items():
        model.eval()
        for beam in args.beams:
            log.info("decoding %s, beam %d", side, beam)
            kw = dict(beam=beam, search_cfg=search_cfg, device=run.device, batch_size=args.decode_batch_size)
            search_run = None
            if side == "attnmt":
                translate = attnmt_translate(translator, sentences, beam=beam, batch_size=args.decode_batch_size)
                if not args.no_search_only:
                    search_run = attnmt_search_only(model, pipeline, sentences, **kw)
            else:
                translate = reference_translate(ref, model, pipeline, sentences, **kw)
                if not args.no_search_only:
                    search_run = reference_translate(ref, model, pipeline, sentences, search_only=True, **kw)
            name = "greedy" if beam <= 1 else f"beam{beam}"
            figures, outputs[side, name] = measure_decoding(translate, search_run, len(sentences),
                                                            repeats=args.repeats, device=run.device,
                                                            memory=run.memory)
            rows.append({"kind": "decode", "side": side, "name": name, "beam": beam,
                         "params": count_parameters(model), **figures})
    for row in rows:
        if row["side"] == "attnmt" and ("reference", row["name"]) in outputs:
            row["same_outputs"] = agreement(outputs["attnmt", row["name"]], outputs["reference", row["name"]])
    return rows


def add_ratios(rows: list[dict]) -> None:
    """Give each attnmt row `ratio`: attnmt / reference for every figure both rows have (> 1 is
    faster for rates, ..._per_s; < 1 is better for seconds and memory)."""
    reference = {(row["kind"], row.get("name")): row for row in rows if row["side"] == "reference"}
    for row in rows:
        other = reference.get((row["kind"], row.get("name")))
        if row["side"] != "attnmt" or other is None:
            continue
        row["ratio"] = {key: (round(value / other[key], 3) if other[key] else None) for key, value in row.items()
                        if key not in NOT_RATIOS and _is_number(value) and _is_number(other.get(key))}


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def start_run(args: argparse.Namespace, cfg: Config) -> BenchRun:
    """The device, the translator of --decode-checkpoint, and the data."""
    device = resolve_device(args.device)
    translator = Translator.load(args.decode_checkpoint, device=str(device)) if args.decode_checkpoint else None
    reuse = translator.pipeline if translator is not None and not args.config else None
    t0 = time.perf_counter()
    data = prepare_data(cfg, train_subset=args.train_subset, decode_split=args.decode_split,
                        decode_sentences=args.decode_sentences, pipeline=reuse)
    log.info("data ready in %.1f s: %d batches, %d sentences to decode", time.perf_counter() - t0,
             len(data.batches), len(data.sentences))
    run = BenchRun(args, cfg, device, PeakMemory(device), data, translator,
                   ["attnmt"] + (["reference"] if args.reference else []))
    if data.epoch_estimated:
        run.notes.append(f"epoch token counts scaled from --train-subset {args.train_subset} to "
                         f"{data.full_train_pairs} pairs")
    if device.type == "cpu":
        run.notes.append("CPU memory is the whole process's RSS (data, both models): compare mem_growth_mb")
    return run


def settings(run: BenchRun, config_source: str) -> dict:
    d, args, cfg = run.data, run.args, run.cfg
    return {"config": config_source, "overrides": list(args.overrides), "arch": cfg.model.arch,
            "train_pairs": d.train_pairs, "full_train_pairs": d.full_train_pairs, "train_subset": args.train_subset,
            "batch_size": cfg.train.batch_size, "batch_by": cfg.train.batch_by, "batches_per_epoch": len(d.batches),
            "epoch_tgt_tokens": d.epoch_tgt_tokens, "epoch_src_tokens": d.epoch_src_tokens,
            "epoch_estimated": d.epoch_estimated, "src_vocab": len(d.pipeline.src_vocab),
            "tgt_vocab": len(d.pipeline.tgt_vocab), "decode_split": args.decode_split,
            "decode_sentences": len(d.sentences), "decode_checkpoint": args.decode_checkpoint,
            "memory_kind": run.memory.kind}


def run_bench(args: argparse.Namespace, argv: list[str] | None = None) -> dict:
    """Every measurement of one invocation; returns the report (benchmarks/common.py's schema)."""
    cfg, config_source = load_bench_config(args)
    with torch_threads(args.threads or cfg.train.num_threads):  # callers (tests) keep their setting
        run = start_run(args, cfg)
        rows = train_rows(run) if not args.no_train else []
        if not args.no_decode and run.data.sentences:
            rows += decode_rows(run)
        add_ratios(rows)
        return make_report("bench", command=command(__file__, argv), environment=environment(str(run.device)),
                           settings=settings(run, config_source), results=rows, notes=run.notes)


# ----------------------------------------------------------------------------- output

TRAIN_ROWS = [("tgt tok/s", "tgt_tok_per_s"), ("src+tgt tok/s", "src_tgt_tok_per_s"), ("ms/step", "step_ms"),
              ("limit tgt tok/s", "limit_tgt_tok_per_s"), ("share of limit %", "share_of_limit"),
              ("epoch s (estimate)", "epoch_s_estimate"), ("epoch s (measured)", "epoch_s_measured"),
              ("peak mem MiB", "peak_mem_mb"), ("mem growth MiB", "mem_growth_mb")]
DECODE_ROWS = [("sent/s", "sent_per_s"), ("mean output len", "mean_len"), ("tgt tok/s", "tgt_tok_per_s"),
               ("search-only sent/s", "search_sent_per_s"), ("peak mem MiB", "peak_mem_mb")]


def _table_lines(report: dict) -> list[str]:
    """One line per figure: attnmt, reference and their ratio."""
    by_side = {(row["kind"], row.get("name"), row["side"]): row for row in report["results"]}
    has_ref = any(side == "reference" for _, _, side in by_side)
    lines = []
    for (kind, name, side), row in by_side.items():
        if side != "attnmt":
            continue
        other = by_side.get((kind, name, "reference"), {})
        prefix = "train" if kind == "train" else name
        lines.append(f"{prefix + ' parameters':26}{row['params']:>14,}" + (f"{other['params']:>14,}" if other else ""))
        for label, key in TRAIN_ROWS if kind == "train" else DECODE_ROWS:
            if row.get(key) is None:
                continue
            scale = 100 if key == "share_of_limit" else 1
            line = f"{prefix + ' ' + label:26}{scale * row[key]:>14,.1f}"
            if has_ref and other.get(key) is not None:
                ratio = row.get("ratio", {}).get(key)
                line += f"{scale * other[key]:>14,.1f}" + (f"{ratio:>8.2f}x" if ratio is not None else f"{'-':>9}")
            lines.append(line)
        if row.get("same_outputs") is not None:
            lines.append(f"{name}: {100 * row['same_outputs']:.1f}% of the sentences get the same translation "
                         "from both")
    return lines


def format_table(report: dict) -> str:
    s, env = report["settings"], report["environment"]
    has_ref = any(row["side"] == "reference" for row in report["results"])
    lines = [f"attnmt bench: {s['config']} ({s['arch']}) on {env['device']} ({env['device_name']}, "
             f"torch {env['torch']}, {env['threads']} threads)",
             f"data: {s['train_pairs']} train pairs in {s['batches_per_epoch']} batches of {s['batch_size']} "
             f"{s['batch_by']}; epoch {s['epoch_tgt_tokens']:,} tgt tokens"
             f"{' (scaled)' if s['epoch_estimated'] else ''}; decode {s['decode_sentences']} sentences",
             "", f"{'':26}{'attnmt':>14}" + (f"{'reference':>14}{'ratio':>9}" if has_ref else "")]
    lines += _table_lines(report)
    if has_ref:
        lines.append("ratio = attnmt / reference (rates: higher is faster; seconds, memory: lower is better)")
    lines += [f"note: {n}" for n in report["notes"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`benchmarks/speed/bench.py ...`; returns the exit code."""
    args = build_parser().parse_args(argv)
    if min(args.steps, *args.beams, args.repeats, args.decode_batch_size) < 1 or args.warmup_steps < 0:
        print("bench: error: --steps, --beams, --repeats and --decode-batch-size must be >= 1, "
              "--warmup-steps >= 0", file=sys.stderr)
        return 2
    return run_main("bench", args, argv, run_bench, format_table)


if __name__ == "__main__":
    raise SystemExit(main())
