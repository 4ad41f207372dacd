#!/usr/bin/env python3
"""Quality per update: OpenNMT-py trained on the same data, shape and batches as
configs/onmt_compare_transformer.yaml, scored by attnmt's own evaluation (issue 16).

OpenNMT-py is not an attnmt dependency (3.5.1 pins an older torch), so it lives in its own venv:

    python3 -m venv /tmp/onmt && /tmp/onmt/bin/pip install OpenNMT-py==3.5.1
    ATTNMT_DATA=../shared/data/multi30k benchmarks/peers/onmt_compare.py OUT_DIR --onmt-bin /tmp/onmt/bin

What it does, each step skipped when its output exists:
1. tokenizes Multi30k de->en with attnmt's Moses tokenizer, lowercased, exactly as the attnmt run
   sees it (the same `MosesTokenizer`), and writes one token-per-space file per split and side;
2. writes OUT_DIR/onmt.yaml: 3+3 layers, d_model 256, 8 heads, FF 512, dropout 0.1, attention
   dropout 0.0, untied embeddings, 128 sentences a batch, Adam 5e-4 with betas 0.9/0.98, constant
   learning rate, no label smoothing, max_grad_norm 5, Glorot initialisation, seed 1; OpenNMT-py's
   Transformer is pre-norm (it has no post-norm option);
3. runs onmt_build_vocab and onmt_train with one thread, saving after --steps (default 227 and 454:
   one and two attnmt epochs of 128 sentences);
4. translates test_2016_flickr with each checkpoint (greedy and beam 5), detokenizes with the same
   Moses detokenizer attnmt uses, and scores with `attnmt.evaluation.score_translations`, so the
   BLEU is computed as for the attnmt runs;
5. writes OUT_DIR/summary.json (benchmarks/common.py's report schema): one "score" row per
   checkpoint and beam, and one "loss" row per window of OpenNMT-py's training log.

Differences from the attnmt run that remain: OpenNMT-py draws its own batches (bucketed by length)
and normalises the loss by sentences (its default `normalization: sents`).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from attnmt.data.corpus import load_multi30k
from attnmt.data.tokenizers import MosesTokenizer
from attnmt.evaluation import score_translations
from benchmarks.common import command, environment, make_report, write_report

SPLITS = ("train", "val", "test_2016_flickr")


def prepare(data_dir: Path) -> None:
    """Lowercased Moses tokens, one sentence a line, for every split and side."""
    data_dir.mkdir(parents=True, exist_ok=True)
    toks = {"de": MosesTokenizer("de", lowercase=True), "en": MosesTokenizer("en", lowercase=True)}
    for split in SPLITS:
        if all((data_dir / f"{split}.{lang}").exists() for lang in ("de", "en")):
            continue
        corpus = load_multi30k(split, "de", "en")
        for lang, lines in (("de", corpus.src), ("en", corpus.tgt)):
            path = data_dir / f"{split}.{lang}"
            path.write_text("".join(" ".join(toks[lang].tokenize(line)) + "\n" for line in lines),
                            encoding="utf-8")


def onmt_config(out: Path, steps: list[int]) -> str:
    data = out / "data"
    return f"""\
save_data: {out}/onmt
src_vocab: {out}/vocab.de
tgt_vocab: {out}/vocab.en
src_vocab_size: 100000
tgt_vocab_size: 100000
overwrite: true
data:
  corpus_1:
    path_src: {data}/train.de
    path_tgt: {data}/train.en
  valid:
    path_src: {data}/val.de
    path_tgt: {data}/val.en
save_model: {out}/model
save_checkpoint_steps: {steps[0]}
keep_checkpoint: -1
train_steps: {max(steps)}
valid_steps: 1000000
report_every: 10
seed: 1
world_size: 1
num_workers: 0
encoder_type: transformer
decoder_type: transformer
enc_layers: 3
dec_layers: 3
hidden_size: 256
word_vec_size: 256
transformer_ff: 512
heads: 8
position_encoding: true
dropout: [0.1]
attention_dropout: [0.0]
share_embeddings: false
share_decoder_embeddings: false
batch_type: sents
batch_size: 128
valid_batch_size: 64
accum_count: [1]
optim: adam
adam_beta1: 0.9
adam_beta2: 0.98
learning_rate: 0.0005
decay_method: none
max_grad_norm: 5
label_smoothing: 0.0
param_init: 0.0
param_init_glorot: true
"""


def run(cmd: list[str], log: Path, env: dict) -> None:
    print("+", " ".join(cmd), flush=True)
    with open(log, "a", encoding="utf-8") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    if proc.returncode:
        sys.exit(f"{cmd[0]} failed (exit {proc.returncode}); see {log}")


def loss_curve(log: Path) -> list[dict]:
    """OpenNMT-py's report lines, one per `report_every` updates: 'Step 10/  454; acc: 12.6; ppl:
    3895.0; xent: 8.3; ...; bsz: 1510/1613/128; ...'. xent is printed with one decimal, ppl with one
    decimal too, so the window's loss per target token is taken as ln(ppl); tgt_tokens is the
    window's mean target tokens a batch (bsz's middle figure) times its updates."""
    curve, previous = [], 0
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.search(r"Step\s+(\d+)/\s*\d+;.*?ppl:\s*([0-9.]+);.*?bsz:\s*(\d+)/\s*(\d+)/", line)
        if m:
            step = int(m.group(1))
            curve.append({"kind": "loss", "step": step, "loss": round(math.log(float(m.group(2))), 4),
                          "tgt_tokens": int(m.group(4)) * (step - previous)})
            previous = step
    return curve


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="output folder (data, OpenNMT-py model, logs, summary.json)")
    ap.add_argument("--onmt-bin", type=Path, required=True,
                    help="folder with onmt_build_vocab, onmt_train and onmt_translate")
    ap.add_argument("--steps", type=int, nargs="+", default=[227, 454],
                    help="checkpoints to score; they must be multiples of the first")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if any(s % args.steps[0] for s in args.steps):
        ap.error(f"--steps {args.steps}: every step must be a multiple of {args.steps[0]}")
    for tool in ("onmt_build_vocab", "onmt_train", "onmt_translate"):
        if not (args.onmt_bin / tool).exists():
            ap.error(f"--onmt-bin {args.onmt_bin}: no {tool} there (pip install OpenNMT-py==3.5.1)")
    return args


def score_checkpoints(args: argparse.Namespace, out: Path, env: dict) -> list[dict]:
    """Translate test_2016_flickr with each checkpoint, greedy and beam 5; one "score" row each."""
    refs = load_multi30k("test_2016_flickr", "de", "en").tgt
    detok = MosesTokenizer("en", lowercase=True)
    scores = []
    for step in args.steps:
        for beam in (1, 5):
            hyp_path = out / f"test.step{step}.beam{beam}.en"
            if not hyp_path.exists():
                run([str(args.onmt_bin / "onmt_translate"), "-model", str(out / f"model_step_{step}.pt"),
                     "-src", str(out / "data" / "test_2016_flickr.de"), "-output", str(hyp_path),
                     "-beam_size", str(beam), "-batch_size", "64", "-max_length", "200"],
                    out / "translate.log", env)
            hyps = [detok.detokenize(line.split()) for line in
                    hyp_path.read_text(encoding="utf-8").splitlines()]
            s = score_translations(hyps, refs, tgt_lang="en")
            scores.append({"kind": "score", "step": step, "beam": beam, "bleu_lc": s["bleu_lc"], "bleu": s["bleu"],
                           "chrf": s["chrf"], "signature": s["signature"]})
            print(json.dumps(scores[-1]), flush=True)
    return scores


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    # OpenNMT-py 3.5.1 loads its own checkpoints with a pickle; torch >= 2.6 refuses that by default.
    # The checkpoints are the ones this script just trained.
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads),
               TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    prepare(out / "data")
    cfg = out / "onmt.yaml"
    cfg.write_text(onmt_config(out, args.steps), encoding="utf-8")
    train_log = out / "train.log"
    if not (out / f"model_step_{max(args.steps)}.pt").exists():
        run([str(args.onmt_bin / "onmt_build_vocab"), "-config", str(cfg), "-n_sample", "-1"],
            out / "vocab.log", env)
        start = time.time()
        run([str(args.onmt_bin / "onmt_train"), "-config", str(cfg)], train_log, env)
        print(f"trained {max(args.steps)} updates in {time.time() - start:.0f} s", flush=True)
    results = score_checkpoints(args, out, env) + (loss_curve(train_log) if train_log.exists() else [])
    report = make_report("onmt_compare", command=command(__file__, argv), environment=environment("cpu"),
                         settings={"onmt_config": str(cfg), "steps": args.steps, "onmt_threads": args.threads},
                         results=results)
    print(f"wrote {write_report(out / 'summary.json', report)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
