"""`attnmt data stats` end to end on toy files and on the real Multi30k."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from attnmt.cli import main
from attnmt.data.stats import percentile



def test_percentile_nearest_rank():
    values = list(range(1, 101))
    assert [percentile(values, p) for p in (50, 90, 99, 100)] == [50, 90, 99, 100]
    assert percentile([7], 50) == 7 and percentile([], 50) == 0


def table_of(out: str) -> list[str]:
    """The table's rows (after the title, header and rule; before the blank line and the counts)."""
    return out.split("\n\n")[0].splitlines()[3:]


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
    rows = {tuple(line.split()[:2]): line.split() for line in table_of(out)}
    # train de: 3 sentences, 7 tokens, types {ein, Hund, läuft, zwei, Katzen} = 5, vocab 4 + 5
    assert rows[("train", "de")][2:7] == ["3", "7", "5", "9", "0.00"]
    # val de: "ein Vogel": one of two tokens unknown
    assert rows[("val", "de")][2:7] == ["1", "2", "2", "9", "50.00"]
    assert rows[("val", "en")][-1] == "2"  # max length


def test_stats_default_splits_of_own_data_and_tsv(tmp_path, capsys):
    make_own_data(tmp_path / "toy")
    (tmp_path / "toy" / "val.tsv").rename(tmp_path / "toy" / "valid.tsv")
    assert main(["data", "stats", "--corpus", f"{tmp_path}/toy/"]) == 0
    splits = {line.split()[0] for line in table_of(capsys.readouterr().out)}
    assert splits == {"train", "val"}  # no test files: not shown
    assert main(["data", "stats", "--corpus", str(tmp_path / "toy" / "valid.tsv")]) == 0
    assert [line.split()[:3] for line in table_of(capsys.readouterr().out)] == [
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
    assert "sentencepiece (bpe, 30 pieces, joint)" in capsys.readouterr().out
    assert list((tmp_path / "cache" / "sentencepiece").glob("spm-bpe-30-*.model"))


def rows_of(out: str) -> dict[tuple[str, str], list[str]]:
    return {tuple(line.split()[:2]): line.split() for line in table_of(out)}


def test_corpus_takes_the_prefix_a_config_takes(tmp_path, capsys):
    """`--corpus data/train` reads data/train.de (as data.train does) and finds data/dev, data/test."""
    make_own_data(tmp_path / "toy")
    (tmp_path / "toy" / "val.tsv").rename(tmp_path / "toy" / "dev.tsv")
    (tmp_path / "toy" / "test.de").write_text("Hund\n", encoding="utf-8")
    (tmp_path / "toy" / "test.en").write_text("dog\n", encoding="utf-8")
    assert main(["data", "stats", "--corpus", str(tmp_path / "toy" / "train")]) == 0
    rows = rows_of(capsys.readouterr().out)
    assert sorted(rows) == [("test", "de"), ("test", "en"), ("train", "de"), ("train", "en"), ("val", "de"),
                            ("val", "en")]
    assert rows[("train", "de")][2:4] == ["3", "7"] and rows[("test", "en")][2:4] == ["1", "1"]
    # --valid names a file as data.valid does, and wins over the neighbour
    (tmp_path / "other.tsv").write_text("a\tb\nc\td\n", encoding="utf-8")
    assert main(["data", "stats", "--corpus", str(tmp_path / "toy" / "train"), "--valid", str(tmp_path / "other.tsv")]) == 0
    assert rows_of(capsys.readouterr().out)[("val", "de")][2] == "2"
    # the old reading (a prefix to which the split name is appended) is gone
    assert main(["data", "stats", "--corpus", str(tmp_path / "toy") + "/"]) == 0  # a folder still means folder/train
    capsys.readouterr()
    (tmp_path / "tsv").mkdir()  # a folder holding train.tsv and val.tsv
    (tmp_path / "tsv" / "train.tsv").write_text("ein Hund\ta dog\n", encoding="utf-8")
    (tmp_path / "tsv" / "val.tsv").write_text("ein Vogel\ta bird\nzwei\ttwo\n", encoding="utf-8")
    assert main(["data", "stats", "--corpus", str(tmp_path / "tsv")]) == 0
    rows = rows_of(capsys.readouterr().out)
    assert rows[("train", "de")][2:4] == ["1", "2"] and rows[("val", "en")][2:4] == ["2", "3"]
    assert main(["data", "stats", "--corpus", str(tmp_path / "toy" / "tr")]) == 2
    assert "found neither" in capsys.readouterr().err


def test_config_gives_the_same_statistics_as_the_options(tmp_path, capsys):
    make_own_data(tmp_path / "toy")
    config = tmp_path / "c.yaml"
    config.write_text(f"data:\n  corpus: files\n  train: {tmp_path}/toy/train\n  valid: {tmp_path}/toy/val.tsv\n"
                      "  lowercase: true\n  min_freq: 2\n")
    assert main(["data", "stats", "--config", str(config)]) == 0
    from_config = capsys.readouterr().out
    assert main(["data", "stats", "--corpus", str(tmp_path / "toy"), "--lowercase", "--min-freq", "2"]) == 0
    from_options = capsys.readouterr().out
    assert from_config.splitlines()[1:] == from_options.splitlines()[1:]
    # min_freq 2, lowercased: "ein" (2) and "hund" (2) in de
    assert rows_of(from_config)[("train", "de")][5] == str(4 + 2)
    assert main(["data", "stats", "--config", str(config), "--min-freq", "3"]) == 2
    assert "drop --min-freq" in capsys.readouterr().err


@pytest.mark.parametrize("lowercase", [False, True])
def test_sentencepiece_statistics_tokenize_as_training_does(tmp_path, capsys, lowercase):
    """Cased pieces (or lowercased ones with --lowercase) and one joint vocabulary, against a
    sentencepiece model trained here with the library directly."""
    import sentencepiece as spm

    make_own_data(tmp_path / "toy")
    assert main(["data", "stats", "--corpus", str(tmp_path / "toy"), "--tokenizer", "sentencepiece",
                 "--vocab-size", "30", "--splits", "train"] + (["--lowercase"] if lowercase else [])) == 0
    rows = rows_of(capsys.readouterr().out)
    src = (tmp_path / "toy" / "train.de").read_text(encoding="utf-8").splitlines()
    tgt = (tmp_path / "toy" / "train.en").read_text(encoding="utf-8").splitlines()
    if lowercase:
        src, tgt = [t.lower() for t in src], [t.lower() for t in tgt]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(src + tgt), model_prefix=str(tmp_path / "ref"),
                                   vocab_size=30, model_type="bpe", character_coverage=1.0,
                                   hard_vocab_limit=False, num_threads=1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "ref.model"))
    pieces = {lang: [sp.encode(t, out_type=str) for t in texts] for lang, texts in (("de", src), ("en", tgt))}
    joint_vocab = 4 + len(Counter(p for side in pieces.values() for s in side for p in s))
    for lang in ("de", "en"):
        tokens = [p for s in pieces[lang] for p in s]
        assert rows[("train", lang)][3:6] == [str(len(tokens)), str(len(set(tokens))), str(joint_vocab)]
    cased = any(p[:1].isupper() or p[1:2].isupper() for s in pieces["de"] for p in s)
    assert cased != lowercase  # "Hund" keeps its case unless lowercased


def test_stats_multi30k_val(monkeypatch, capsys, multi30k_dir):
    monkeypatch.setenv("ATTNMT_DATA", str(multi30k_dir))
    assert main(["data", "stats", "--splits", "val", "test_2016_flickr"]) == 0
    out = capsys.readouterr().out
    assert "1,014" in out and "test_2016_flickr" in out


def test_train_rows_are_the_prepared_pairs_and_the_filters_are_counted(tmp_path, capsys):
    make_own_data(tmp_path / "toy")  # train: "ein Hund", "ein Hund läuft", "zwei Katzen"
    with open(tmp_path / "toy" / "train.de", "a", encoding="utf-8") as de, \
            open(tmp_path / "toy" / "train.en", "a", encoding="utf-8") as en:
        de.write("ein Hund\n\n")   # a duplicate of pair 1, and a pair with an empty source
        en.write("a dog\nnothing\n")
    config = tmp_path / "c.yaml"
    config.write_text(f"data:\n  corpus: files\n  train: {tmp_path}/toy/train\n  valid: {tmp_path}/toy/val.tsv\n"
                      "  max_len: 2\n  dedup: true\n")
    assert main(["data", "stats", "--config", str(config), "--splits", "train"]) == 0
    out = capsys.readouterr().out
    # 5 read; the empty source; "ein Hund läuft" (3 tokens > 2); the second "ein Hund": 2 kept
    assert "train: 5 pairs read, 2 kept; dropped: empty 1, too long 1, duplicate 1" in out
    assert rows_of(out)[("train", "de")][2:5] == ["2", "4", "4"]  # ein Hund, zwei Katzen: 4 tokens, 4 types
