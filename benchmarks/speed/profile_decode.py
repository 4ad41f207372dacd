#!/usr/bin/env python3
"""Where the native engine's decoding time goes: a profile of ``Translator.translate`` on a run.

After a warm-up, the same sentences are translated twice:

1. timed, with the model's ``encode`` and ``decode_step`` wrapped: the call's wall time, the
   encoder's, and every decoder step's with its row count (sentences x live hypotheses). What
   is left of the call is the search around the steps, tokenizing and detokenizing.
2. under ``torch.profiler``: every op's own CPU time, grouped (matrix products, attention,
   search arithmetic, copies and reorders, element-wise and norms, other ops); what the ops do
   not account for is Python and torch's dispatch.

The steps are then grouped by their rows against the fullest step (batch x beam): the time each
group took and its cost per row. A step with few rows runs its matrix products at a low
throughput, so it costs more per row; "if every row cost what it costs in the full steps" is
what refilling finished rows with new sentences could at most save of the steps' time.

    benchmarks/speed/profile_decode.py RUN_DIR [--beam 5] [--sentences N] [--threads 2] \\
        [--batch-size 64] [--split test_2016_flickr] [--json profile_decode.json]

Shapes: none; everything goes through the translator's text interface.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from attnmt import Translator
from attnmt.config import load_saved_config
from attnmt.data.corpus import corpus_spec, load_corpus
from benchmarks.common import command, environment, make_report, run_main, torch_threads

WARMUP_SENTENCES = 16
# torch op name -> group; ops not named here are "other ops"
OP_GROUPS = {
    "matrix products": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"),
    "attention kernels": ("aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_softmax", "aten::softmax"),
    "search arithmetic": ("aten::log_softmax", "aten::_log_softmax", "aten::topk", "aten::max", "aten::gather",
                          "aten::masked_fill", "aten::maximum", "aten::where", "aten::remainder",
                          "aten::floor_divide", "aten::div", "aten::isfinite"),
    "copies and reorders": ("aten::index_select", "aten::cat", "aten::copy_", "aten::index_copy_",
                            "aten::index_add_", "aten::clone", "aten::index", "aten::contiguous", "aten::to",
                            "aten::_to_copy", "aten::repeat_interleave", "aten::nonzero", "aten::embedding"),
    "element-wise and norms": ("aten::add", "aten::add_", "aten::mul", "aten::gelu", "aten::relu",
                               "aten::native_layer_norm", "aten::layer_norm", "aten::dropout", "aten::tanh",
                               "aten::sigmoid", "aten::gru_cell", "aten::_thnn_fused_gru_cell"),
}
ROW_GROUPS = ((0.5, ">= 50% of the fullest step's rows"), (0.1, "10-50%"), (0.0, "< 10%"))


class StepClock:
    """Wraps a model's encode and decode_step (instance attributes, removed by `restore`) and
    records their wall times and each step's rows."""

    def __init__(self, model):
        self.model, self.encode_s, self.steps = model, 0.0, []  # steps: (rows, seconds)
        encode, decode_step = model.encode, model.decode_step

        def timed_encode(*args, **kwargs):
            start = time.perf_counter()
            out = encode(*args, **kwargs)
            self.encode_s += time.perf_counter() - start
            return out

        def timed_step(prev_ids, state):
            start = time.perf_counter()
            out = decode_step(prev_ids, state)
            self.steps.append((int(prev_ids.shape[0]), time.perf_counter() - start))
            return out

        model.encode, model.decode_step = timed_encode, timed_step

    def restore(self) -> None:
        del self.model.encode, self.model.decode_step


def step_groups(steps: list[tuple[int, float]]) -> tuple[list[dict], float]:
    """The steps grouped by rows against the fullest step, and the steps' time if every row cost
    what it costs in the first group."""
    full = max(rows for rows, _ in steps)
    groups, left = [], list(steps)
    for share, label in ROW_GROUPS:
        mine = [(r, s) for r, s in left if r >= share * full]
        left = [(r, s) for r, s in left if r < share * full]
        rows, seconds = sum(r for r, _ in mine), sum(s for _, s in mine)
        groups.append({"rows_from": round(share * full), "label": label, "steps": len(mine), "rows": rows,
                       "seconds": round(seconds, 4), "us_per_row": round(1e6 * seconds / rows, 2) if rows else None})
    per_row_full = groups[0]["seconds"] / groups[0]["rows"]
    return groups, per_row_full * sum(r for r, _ in steps)


def op_groups(profile, wall_s: float) -> list[dict]:
    """The profiled ops' own CPU time by group, and what is left of the wall time."""
    totals = {name: 0.0 for name in OP_GROUPS}
    totals["other ops"] = 0.0
    group_of = {op: name for name, ops in OP_GROUPS.items() for op in ops}
    for event in profile.key_averages():
        totals[group_of.get(event.key, "other ops")] += event.self_cpu_time_total / 1e6
    totals["Python, dispatch, tokenizing (not in any op)"] = max(0.0, wall_s - sum(totals.values()))
    return [{"group": name, "seconds": round(s, 4), "share": round(s / wall_s, 4)} for name, s in totals.items()]


def profile_decode(args: argparse.Namespace, argv: list[str] | None = None) -> dict:
    import torch

    run_dir = Path(args.run_dir)
    cfg = load_saved_config(run_dir / "config.json")
    sentences = list(load_corpus(corpus_spec(cfg.data), args.split).src)[: args.sentences or None]
    with torch_threads(args.threads):
        translator = Translator.load(run_dir, device="cpu")
        kw = dict(beam_size=args.beam, batch_size=args.batch_size)
        translator.translate(sentences[:WARMUP_SENTENCES], **kw)
        clock = StepClock(translator.model)
        try:
            start = time.perf_counter()
            results = translator.translate(sentences, **kw)
            wall = time.perf_counter() - start
        finally:
            clock.restore()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            start = time.perf_counter()
            translator.translate(sentences, **kw)
            profiled_wall = time.perf_counter() - start
    steps_s = sum(s for _, s in clock.steps)
    groups, full_row_s = step_groups(clock.steps)
    tokens = sum(len(r.tokens) for r in results)
    timed = {"kind": "wall", "sentences": len(sentences), "tgt_tokens": tokens, "seconds": round(wall, 4),
             "sent_per_s": round(len(sentences) / wall, 1), "encode_s": round(clock.encode_s, 4),
             "steps": len(clock.steps), "steps_s": round(steps_s, 4),
             "around_steps_s": round(wall - steps_s - clock.encode_s, 4),
             "steps_s_at_full_row_cost": round(full_row_s, 4),
             "refill_saves_at_most": round((steps_s - full_row_s) / wall, 4)}
    rows = [timed] + [{"kind": "rows", **g} for g in groups]
    rows += [{"kind": "ops", "profiled_wall_s": round(profiled_wall, 4), **g} for g in op_groups(profile, profiled_wall)]
    settings = {"run_dir": str(run_dir), "split": args.split, "beam": args.beam, "batch_size": args.batch_size,
                "threads": args.threads}
    return make_report("profile_decode", command=command(__file__, argv), environment=environment("cpu"),
                       settings=settings, results=rows,
                       notes=["op times are each op's own CPU time under torch.profiler (a slower, second pass); "
                              "shares are of that pass's wall time"])


def format_table(report: dict) -> str:
    s, env = report["settings"], report["environment"]
    wall = next(r for r in report["results"] if r["kind"] == "wall")
    lines = [f"profile_decode: {s['run_dir']}, {s['split']}, beam {s['beam']}, batch {s['batch_size']}, "
             f"{s['threads']} threads, {env.get('cpu', '?')}",
             f"{wall['sentences']} sentences in {wall['seconds']:.2f} s ({wall['sent_per_s']} sentences/s): "
             f"encoder {wall['encode_s']:.2f} s, {wall['steps']} decoder steps {wall['steps_s']:.2f} s, "
             f"around the steps (search, tokenizing) {wall['around_steps_s']:.2f} s", "",
             f"{'decoder steps by rows':44}{'steps':>7}{'rows':>9}{'seconds':>9}{'us/row':>9}"]
    for r in (r for r in report["results"] if r["kind"] == "rows"):
        lines.append(f"{r['label'] + ' (' + str(r['rows_from']) + '+)':44}{r['steps']:>7}{r['rows']:>9}"
                     f"{r['seconds']:>9.2f}{(r['us_per_row'] or 0):>9.1f}")
    lines += [f"steps at the full steps' cost per row: {wall['steps_s_at_full_row_cost']:.2f} s; refilling rows "
              f"saves at most {100 * wall['refill_saves_at_most']:.1f}% of the wall time", "",
              f"{'op group (profiled pass)':46}{'seconds':>9}{'share':>8}"]
    for r in (r for r in report["results"] if r["kind"] == "ops"):
        lines.append(f"{r['group']:46}{r['seconds']:>9.2f}{100 * r['share']:>7.1f}%")
    lines += [f"note: {n}" for n in report["notes"]]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="profile_decode", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", help="a training run (written by attnmt train)")
    p.add_argument("--beam", type=int, default=5, help="beam size (1 = greedy)")
    p.add_argument("--split", default="test_2016_flickr", help="the split to translate")
    p.add_argument("--sentences", type=int, default=None, help="only the first N sentences")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch, as in Translator.translate")
    p.add_argument("--threads", type=int, default=2, help="CPU threads for torch")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the report as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no table")
    return p


def main(argv: list[str] | None = None) -> int:
    """`benchmarks/speed/profile_decode.py RUN_DIR ...`; returns the exit code."""
    args = build_parser().parse_args(argv)
    if min(args.beam, args.batch_size, args.threads) < 1 or (args.sentences is not None and args.sentences < 1):
        print("profile_decode: error: --beam, --batch-size, --threads and --sentences must be >= 1", file=sys.stderr)
        return 2
    return run_main("profile_decode", args, argv, profile_decode, format_table)


if __name__ == "__main__":
    raise SystemExit(main())
