"""The README's main job: train on Multi30k de->en, evaluate on test_2016_flickr, translate a
few sentences and draw an attention heatmap. The full seed-size config runs on a GPU; on a CPU
the quickstart config trains a smaller model within a time budget (train.max_minutes)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import torch

from attnmt.errors import AttnmtError

log = logging.getLogger(__name__)

EXAMPLES = [
    "Ein Hund läuft durch das Gras .",
    "Zwei Männer spielen Fußball auf einem Feld .",
    "Eine Frau mit einem roten Hut sitzt auf einer Bank .",
    "Ein kleines Mädchen klettert in ein Spielhaus aus Holz .",
]


def find_config(name: str) -> Path:
    """A config by path, or by name from the repository's configs/ folder."""
    path = Path(name)
    if path.is_file():
        return path
    for folder in (Path.cwd() / "configs", Path(__file__).resolve().parents[2] / "configs"):
        if (folder / name).is_file():
            return folder / name
    raise AttnmtError(f"config {name!r} not found (looked in ./configs and the attnmt repository)")


def demo_command(args) -> int:
    from attnmt.config import load_config
    from attnmt.plotting import plot_attention
    from attnmt.training import train
    from attnmt.translator import Translator

    default = "multi30k_rnn.yaml" if torch.cuda.is_available() else "quickstart_rnn.yaml"
    config_path = find_config(args.config or default)
    cfg = load_config(config_path)
    run_dir = Path(args.run_dir)
    if (run_dir / "metrics.jsonl").exists():
        log.info("removing the previous demo run in %s", run_dir)
        shutil.rmtree(run_dir)
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
    (run_dir / "demo_scores.json").write_text(json.dumps(reports, indent=2) + "\n")

    print("== translating", flush=True)
    results = translator.translate(EXAMPLES, beam_size=5)
    for source, result in zip(EXAMPLES, results):
        print(f"   {source}\n   -> {result.text}")
    heatmap = plot_attention(results[0].attention, results[0].source_tokens, results[0].tokens,
                             run_dir / "attention.png", title=results[0].text)
    print(f"== attention heatmap: {heatmap}")
    return 0
