"""`attnmt demo`, the README's main job: train on Multi30k de->en, evaluate on test_2016_flickr, translate a
few sentences and draw an attention heatmap. The full seed-size config runs on a GPU; on a CPU
the quickstart config trains a smaller model within a time budget (train.max_minutes).

The demo writes only into a new (or empty) folder, which it marks as its own; it replaces a
folder on a later run only when that mark is there, and refuses any other folder."""

from __future__ import annotations

import argparse
import logging
import shutil
from pathlib import Path

from attnmt.errors import AttnmtError
from attnmt.files import write_json

HELP = "the README's main job: train, evaluate, translate, draw"

log = logging.getLogger(__name__)

EXAMPLES = [
    "Ein Hund läuft durch das Gras .",
    "Zwei Männer spielen Fußball auf einem Feld .",
    "Eine Frau mit einem roten Hut sitzt auf einer Bank .",
    "Ein kleines Mädchen klettert in ein Spielhaus aus Holz .",
]


DEMO_MARKER = ".attnmt-demo"  # written into every run directory the demo creates


def prepare_run_dir(run_dir: Path) -> None:
    """Make `run_dir` ready for a new demo run without ever deleting what the demo did not make.

    A missing or empty folder is used; a folder holding the marker of an earlier demo is
    replaced; anything else (a real training run, your files) is refused.

    Raises:
        AttnmtError: `run_dir` is a file, or a non-empty folder that no demo created.
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise AttnmtError(f"--run-dir {run_dir}: is a file, not a folder")
    if run_dir.is_dir() and any(run_dir.iterdir()):
        if not (run_dir / DEMO_MARKER).is_file():
            raise AttnmtError(f"--run-dir {run_dir}: the folder is not empty and was not made by `attnmt demo` "
                              f"(no {DEMO_MARKER} file), so the demo will not replace it; give a new --run-dir "
                              "(or, for a demo of an older attnmt, delete the folder yourself)")
        log.info("replacing the previous demo run in %s", run_dir)
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / DEMO_MARKER).write_text("made by `attnmt demo`, which may replace this folder\n")


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None, help="config file or packaged name (default: multi30k_rnn on a GPU, "
                        "quickstart_rnn on a CPU)")
    parser.add_argument("--run-dir", default="runs/demo", help="a new folder, or one an earlier demo made (replaced)")


def run(args) -> int:
    import torch

    from attnmt.allocator import keep_freed_memory
    from attnmt.config import find_config, load_config
    from attnmt.plotting import plot_attention
    from attnmt.training import train
    from attnmt.translator import Translator

    default = "multi30k_rnn" if torch.cuda.is_available() else "quickstart_rnn"
    config_path = find_config(args.config or default)
    cfg = load_config(config_path)
    run_dir = Path(args.run_dir)
    prepare_run_dir(run_dir)
    keep_freed_memory()  # as `attnmt train` (allocator.py)
    print(f"== training {config_path} -> {run_dir}", flush=True)
    result = train(cfg, run_dir)
    print(f"   {result.epochs} epochs in {result.seconds / 60:.1f} min; best epoch: {result.best.get('epoch')}")

    translator = Translator.load(run_dir)
    print("== evaluating on test_2016_flickr (beam 5 and greedy)", flush=True)
    reports = {}
    for beam in (5, 1):
        reports[f"beam{beam}"] = report = translator.evaluate("test_2016_flickr", beam_size=beam)
        print(f"   beam {beam}: BLEU {report['bleu']:.2f}  chrF {report['chrf']:.2f}  "
              f"lowercased tokenized BLEU {report['bleu_lc_tok']:.2f}  ppl {report['ppl']:.2f}")
    print(f"   {reports['beam5']['signature']}")
    write_json(run_dir / "demo_scores.json", reports)

    print("== translating", flush=True)
    results = translator.translate(EXAMPLES, beam_size=5)
    for source, result in zip(EXAMPLES, results):
        print(f"   {source}\n   -> {result.text}")
    heatmap = plot_attention(results[0].attention, results[0].source_tokens, results[0].tokens,
                             run_dir / "attention.png", title=results[0].text)
    print(f"== attention heatmap: {heatmap}")
    print(f"== serve it (HTTP API and the attention page): attnmt serve {run_dir}")
    return 0
