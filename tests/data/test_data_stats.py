"""`attnmt data stats` end to end on toy files and on the real Multi30k."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnmt.cli import main
from attnmt.data.stats import percentile

SHARED = Path("/work/shared/data/multi30k")


def test_percentile_nearest_rank():
    values = list(range(1, 101))
    assert [percentile(values, p) for p in (50, 90, 99, 100)] == [50, 90, 99, 100]
    assert percentile([7], 50) == 7 and percentile([], 50) == 0


def make_own_data(folder: Path):
    folder.mkdir()
    (folder / "train.de").write_text("ein Hund\nein Hund läuft\nzwei Katzen\n", encoding="utf-8")
    (folder / "train.en").write_text("a dog\na dog runs\ntwo cats\n", encoding="utf-8")
    (folder / "val.tsv").write_text("ein Vogel\ta bird\n", encoding="utf-8")


def test_stats_on_own_folder(tmp_path, capsys):
    make_own_data(tmp_path / "toy")
    code = main(["data", "stats", "--corpus", str(tmp_path / "toy"), "--min-freq", "1", "--splits", "train", "val"])
    out = capsys.readouterr().out
    assert code == 0
    rows = {tuple(line.split()[:2]): line.split() for line in out.splitlines()[3:]}
    # train de: 3 sentences, 7 tokens, types {ein, Hund, läuft, zwei, Katzen} = 5, vocab 4 + 5
    assert rows[("train", "de")][2:7] == ["3", "7", "5", "9", "0.00"]
    # val de: "ein Vogel": one of two tokens unknown
    assert rows[("val", "de")][2:7] == ["1", "2", "2", "9", "50.00"]
    assert rows[("val", "en")][-1] == "2"  # max length


def test_stats_default_splits_of_own_data_and_tsv(tmp_path, capsys):
    make_own_data(tmp_path / "toy")
    (tmp_path / "toy" / "val.tsv").rename(tmp_path / "toy" / "valid.tsv")
    assert main(["data", "stats", "--corpus", f"{tmp_path}/toy/"]) == 0
    splits = {line.split()[0] for line in capsys.readouterr().out.splitlines()[3:]}
    assert splits == {"train", "val"}  # no test files: not shown
    assert main(["data", "stats", "--corpus", str(tmp_path / "toy" / "valid.tsv")]) == 0
    assert [line.split()[:3] for line in capsys.readouterr().out.splitlines()[3:]] == [
        ["train", "de", "1"], ["train", "en", "1"]]


def test_stats_missing_split_is_one_line_error(tmp_path, capsys):
    make_own_data(tmp_path / "toy")
    assert main(["data", "stats", "--corpus", str(tmp_path / "toy"), "--splits", "test"]) == 2
    assert "no test files configured" in capsys.readouterr().err
    assert main(["data", "stats", "--corpus", str(tmp_path / "nothing")]) == 2
    assert "found neither" in capsys.readouterr().err


def test_stats_sentencepiece_on_own_data(tmp_path, capsys):
    make_own_data(tmp_path / "toy")
    assert main(["data", "stats", "--corpus", str(tmp_path / "toy"), "--tokenizer", "sentencepiece",
                 "--vocab-size", "30", "--splits", "train"]) == 0
    assert "sentencepiece (30 pieces, joint)" in capsys.readouterr().out
    assert list((tmp_path / "cache" / "sentencepiece").glob("spm-bpe-30-*.model"))


@pytest.mark.skipif(not SHARED.is_dir(), reason="no local copy of Multi30k")
def test_stats_multi30k_val(monkeypatch, capsys):
    monkeypatch.setenv("ATTNMT_DATA", str(SHARED))
    assert main(["data", "stats", "--splits", "val", "test_2016_flickr"]) == 0
    out = capsys.readouterr().out
    assert "1,014" in out and "test_2016_flickr" in out
