"""Smoke test of benchmarks/speed/capitals_budget.py on a tiny random Transformer whose
sentencepiece vocabulary cuts capitals into letters: both budgets are timed in each round, and
capitals get fewer output tokens with the budget counted in lower case."""

import argparse
import sys
from pathlib import Path

import pytest

pytest.importorskip("ctranslate2")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.speed import capitals_budget  # noqa: E402


def test_capitals_budget_times_both_budgets(pieces_run, multi30k_dir, monkeypatch, capsys):
    monkeypatch.setenv("ATTNMT_DATA", str(multi30k_dir))
    run, export, _ = pieces_run
    args = argparse.Namespace(run=str(export), engine=None, split="test_2016_flickr", sentences=6, rounds=2, beam=2)
    typed, lower = capitals_budget.run(args)["settings"]
    assert (typed["budget_in_lower_case"], lower["budget_in_lower_case"]) == (False, True)
    assert typed["capitals_cut"] == lower["capitals_cut"] == 6  # random weights: every output runs to its bound
    assert lower["capitals_tokens"] < typed["capitals_tokens"]
    assert lower["clean_tokens"] <= typed["clean_tokens"]  # never more than the typed pieces give
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("budget on the ")]
    assert len(lines) == 2
    with pytest.raises(SystemExit) as exit_:
        capitals_budget.main([str(export), "--sentences", "0"])
    assert exit_.value.code == 2
