#!/usr/bin/env python3
"""Decoding speed of a trained run: the native engine, CTranslate2 float32 and CTranslate2 int8.

For every engine and beam size it translates a whole test split (test_2016_flickr by default)
through ``Translator.translate``, tokenizing and detokenizing included, loading and export
excluded, after one warm-up call on the first sentences, and reports sentences/s, output
tokens/s and the mean output length (the median of ``--repeats`` timings). The CTranslate2 rows
export the run with ``attnmt export RUN_DIR -o DIR --quantization Q`` and load the folder with
``Translator.load(DIR, engine="ctranslate2")``; where that is not possible (no ctranslate2, a
version of attnmt without the engine, an RNN run) the row is skipped and says why. Each
CTranslate2 row also gives the share of sentences whose tokens equal the native engine's at the
same beam size. Each engine runs in a fresh process, so no engine's state reaches another's row.

    benchmarks/speed/bench_decode.py RUN_DIR [--beams 1 5] [--threads 2] [--repeats 1] \\
        [--engines native ct2-float32 ct2-int8] [--sentences N] [--json bench_decode.json]

Shapes: none; everything goes through the translator's text interface.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from attnmt import Translator
from attnmt.config import load_saved_config
from attnmt.data.corpus import corpus_spec, load_corpus
from attnmt.errors import AttnmtError
from benchmarks.common import (
    command,
    environment,
    make_report,
    median_time,
    rate,
    run_main,
    torch_threads,
)
from benchmarks.speed.ceiling import decode_macs, gemm_throughput, limit_tokens_per_s, step_shapes

log = logging.getLogger("attnmt.bench_decode")

ENGINES = ("native", "ct2-float32", "ct2-int8")
WARMUP_SENTENCES = 16


def ct2_unavailable(run_dir: Path) -> str | None:
    """Why the CTranslate2 rows cannot run, or None when they can."""
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        return "the ctranslate2 package is not installed"
    if "engine" not in inspect.signature(Translator.load).parameters:
        return "this attnmt has no CTranslate2 engine (Translator.load takes no engine=)"
    arch = load_saved_config(run_dir / "config.json").model.arch
    if arch != "transformer":
        return f"CTranslate2 has no {arch.upper()} models: only Transformer runs can be exported"
    return None


def export(run_dir: Path, out_dir: Path, quantization: str) -> None:
    """`attnmt export RUN_DIR -o OUT_DIR --quantization Q`, in a child process of this Python."""
    command = [sys.executable, "-m", "attnmt", "export", str(run_dir), "-o", str(out_dir),
               "--quantization", quantization]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise AttnmtError(f"attnmt export --quantization {quantization} failed: {' / '.join(tail)}")


def time_engine(translator: Translator, sentences: list[str], *, beam: int, batch_size: int,
                repeats: int) -> tuple[dict, list[list[str]]]:
    """Translate `sentences` `repeats` times after a warm-up; figures of the median run and the
    output tokens per sentence."""
    translator.translate(sentences[:WARMUP_SENTENCES], beam_size=beam, batch_size=batch_size)
    timing = median_time(lambda: translator.translate(sentences, beam_size=beam, batch_size=batch_size),
                         repeats=repeats)
    sec, results = timing.median, timing.result
    tokens = sum(len(r.tokens) for r in results)
    n = len(sentences)
    figures = {"beam": beam, "sentences": n, "outputs": len(results), "tgt_tokens": tokens,
               "seconds": round(sec, 4), "all_seconds": [round(s, 4) for s in timing.seconds],
               "sent_per_s": rate(n, sec, 2), "tgt_tok_per_s": rate(tokens, sec),
               "mean_output_len": round(tokens / max(n, 1), 2)}
    return figures, [r.tokens for r in results]


def load_engine(engine: str, run_dir: Path, export_root: Path) -> Translator:
    """The run through one engine; the CTranslate2 ones export it first (reused when present)."""
    if engine == "native":
        return Translator.load(run_dir, device="cpu")
    quantization = engine.split("-", 1)[1]
    folder = export_root / f"{run_dir.name}-ct2-{quantization}"
    if not (folder / "model.bin").exists():
        export(run_dir, folder, quantization)
    return Translator.load(folder, device="cpu", engine="ctranslate2")


def _engine_child(engine: str, run_dir: Path, export_root: Path, sentences: list[str], beams: list[int],
                  batch_size: int, repeats: int, threads: int) -> tuple[list[dict], dict[int, list[list[str]]]]:
    """One engine's rows and output tokens per beam, in a process of its own (engine_rows)."""
    with torch_threads(threads):
        translator = load_engine(engine, run_dir, export_root)
        rows, tokens_at = [], {}
        for beam in beams:
            log.info("%s, beam %d: %d sentences", engine, beam, len(sentences))
            figures, tokens_at[beam] = time_engine(translator, sentences, beam=beam, batch_size=batch_size,
                                                   repeats=repeats)
            rows.append({"kind": "decode", "engine": engine, **figures})
    return rows, tokens_at


def engine_rows(args: argparse.Namespace, run_dir: Path, sentences: list[str], notes: list[str]) -> list[dict]:
    """One "decode" row per engine and beam size; an engine that cannot run leaves a note instead.

    Each engine runs in a fresh process, so that no engine's state reaches another's row (a
    second CTranslate2 model once decoded at 0.55x because the first had left the process's
    OpenMP threads at 1; docs/performance.md)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    rows, native_tokens = [], {}
    why_not = ct2_unavailable(run_dir) if any(e != "native" for e in args.engines) else None
    with tempfile.TemporaryDirectory(prefix="attnmt-bench-decode-") as scratch:
        export_root = Path(args.export_dir) if args.export_dir else Path(scratch)
        for engine in args.engines:
            try:
                if engine != "native" and why_not:
                    raise AttnmtError(why_not)
                with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
                    found, tokens_at = pool.submit(_engine_child, engine, run_dir, export_root, sentences,
                                                   list(args.beams), args.batch_size, args.repeats,
                                                   args.threads).result()
            except (AttnmtError, OSError, ValueError) as err:
                notes.append(f"{engine} skipped: {err}")
                log.warning("%s skipped: %s", engine, err)
                continue
            for row in found:
                beam = row["beam"]
                if engine == "native":
                    native_tokens[beam] = tokens_at[beam]
                elif beam in native_tokens:
                    same = sum(a == b for a, b in zip(tokens_at[beam], native_tokens[beam]))
                    row["same_tokens_as_native"] = round(same / max(len(tokens_at[beam]), 1), 4)
            rows += found
    return rows


def add_limits(rows: list[dict], run_dir: Path, sentences: list[str], batch_size: int) -> None:
    """Put each row beside this machine's limit (ceiling.py): the multiply-adds per output token of
    the run's model, torch's GEMM throughput at its shapes on batch * beam rows (int8 for the
    CTranslate2 int8 row, fp32 otherwise), the tokens/s they allow, and the row's share of that."""
    translator = Translator.load(run_dir, device="cpu")
    model, tokenizer = translator.model, translator.pipeline.src_tokenizer
    src_len = sum(len(tokenizer.tokenize(s)) for s in sentences) / max(len(sentences), 1)
    shapes = step_shapes(model)
    for beam in sorted({row["beam"] for row in rows}):
        at_beam = [row for row in rows if row["beam"] == beam]
        reference = next((row for row in at_beam if row["engine"] == "native"), at_beam[0])
        macs = decode_macs(model, src_len=src_len, out_len=max(reference["mean_output_len"], 1.0))
        gemm = gemm_throughput(shapes, rows=batch_size * beam)
        for row in at_beam:
            precision = "int8" if row["engine"] == "ct2-int8" else "fp32"
            limit = limit_tokens_per_s(macs, gemm[f"{precision}_gmac_per_s"], beam=beam)
            row.update(limit_precision=precision, macs_per_output_token=round(macs.per_output_token(beam)),
                       gemm_gmac_per_s=gemm[f"{precision}_gmac_per_s"], limit_tgt_tok_per_s=round(limit),
                       share_of_limit=round(row["tgt_tok_per_s"] / limit, 4))


def run_bench(args: argparse.Namespace, argv: list[str] | None = None) -> dict:
    """Every row of one invocation; returns the report (benchmarks/common.py's schema)."""
    run_dir = Path(args.run_dir)
    cfg = load_saved_config(run_dir / "config.json")
    sentences = list(load_corpus(corpus_spec(cfg.data), args.split).src)
    if args.sentences:
        sentences = sentences[: args.sentences]
    best = run_dir / "best.json"
    checkpoint = best.read_text(encoding="utf-8") if best.exists() else None
    notes: list[str] = []
    with torch_threads(args.threads):
        env = environment("cpu")
        rows = engine_rows(args, run_dir, sentences, notes)
        if rows and not args.no_limit:
            add_limits(rows, run_dir, sentences, args.batch_size)
    if best.exists() and best.read_text(encoding="utf-8") != checkpoint:
        notes.append("warning: the run's best.json changed during the benchmark (is it still training?): "
                     "the engines may have decoded different weights")
        log.warning(notes[-1])
    settings = {"run_dir": str(run_dir), "arch": cfg.model.arch, "split": args.split, "sentences": len(sentences),
                "batch_size": args.batch_size, "repeats": args.repeats, "engines": list(args.engines)}
    return make_report("bench_decode", command=command(__file__, argv), environment=env, settings=settings,
                       results=rows, notes=notes)


def format_table(report: dict) -> str:
    env, s = report["environment"], report["settings"]
    lines = [f"attnmt bench_decode: {s['run_dir']} ({s['arch']}), {s['split']}, "
             f"{s['sentences']} sentences, batch {s['batch_size']}",
             f"{env['cpu']}, {env['threads']} threads, torch {env['torch']}, ctranslate2 {env['ctranslate2']}, "
             f"{env['date']}", "",
             f"{'engine':14}{'beam':>5}{'sent/s':>10}{'out tok/s':>11}{'mean len':>10}{'seconds':>9}{'= native':>10}"
             f"{'limit tok/s':>13}{'share':>8}"]
    for row in report["results"]:
        same, limit, share = row.get("same_tokens_as_native"), row.get("limit_tgt_tok_per_s"), row.get("share_of_limit")
        lines.append(f"{row['engine']:14}{row['beam']:>5}{row['sent_per_s']:>10,.1f}{row['tgt_tok_per_s']:>11,.0f}"
                     f"{row['mean_output_len']:>10.2f}{row['seconds']:>9.2f}"
                     f"{(f'{100 * same:.1f}%' if same is not None else '-'):>10}"
                     f"{(f'{limit:,} ' + row['limit_precision'] if limit else '-'):>13}"
                     f"{(f'{100 * share:.1f}%' if limit else '-'):>8}")
    lines += report["notes"]
    lines.append("tokenizing and detokenizing included; loading and export excluded; '= native': share of "
                 "sentences with the native engine's tokens at the same beam; 'limit': the output tokens/s this "
                 "machine's torch GEMMs (fp32, or int8 for ct2-int8) allow at the model's multiply-adds per token "
                 "(benchmarks/speed/ceiling.py), 'share': the row's tokens/s over it")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench_decode", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", help="a training run (written by attnmt train)")
    p.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    p.add_argument("--beams", type=int, nargs="+", default=[1, 5], help="beam sizes (1 = greedy)")
    p.add_argument("--split", default="test_2016_flickr", help="the split to translate (own data: test)")
    p.add_argument("--sentences", type=int, default=None, help="only the first N sentences (smoke runs)")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch, as in Translator.translate")
    p.add_argument("--threads", type=int, default=2, help="CPU threads for torch (and the engine, which follows it)")
    p.add_argument("--repeats", type=int, default=1, help="timed runs per row; the median is reported")
    p.add_argument("--export-dir", default=None,
                   help="keep the exported CTranslate2 folders here (reused when present; default: a temporary folder)")
    p.add_argument("--json", default="bench_decode.json", metavar="PATH", help="where the JSON report goes")
    p.add_argument("--no-limit", action="store_true", help="skip measuring this machine's limit (ceiling.py)")
    p.add_argument("-q", "--quiet", action="store_true", help="no table")
    return p


def main(argv: list[str] | None = None) -> int:
    """`benchmarks/speed/bench_decode.py RUN_DIR ...`; returns the exit code."""
    args = build_parser().parse_args(argv)
    if min(args.beams + [args.repeats, args.batch_size, args.threads]) < 1:
        print("bench_decode: error: --beams, --repeats, --batch-size and --threads must be >= 1", file=sys.stderr)
        return 2
    return run_main("bench_decode", args, argv, run_bench, format_table)


if __name__ == "__main__":
    raise SystemExit(main())
