"""The vocabulary shortlist (vmap.txt): built as documented (checked against a brute-force count),
read by CTranslate2 (a restricted map restricts the output), harmless when full (same output as
without one), written by `attnmt export --vocab-map` and used by the engine when present."""

import json
from itertools import product

import numpy as np
import pytest

pytest.importorskip("ctranslate2")

from support import toy  # noqa: E402
from attnmt.cli import main  # noqa: E402
from attnmt.data import cooccurrence  # noqa: E402
from attnmt.data.vocab import Vocab  # noqa: E402
from attnmt.engines.ctranslate2_export import export_run  # noqa: E402
from attnmt.data.cooccurrence import count_cooccurrence  # noqa: E402
from attnmt.engines.vocab_map import (VocabMapSettings, full_vocab_map_lines,  # noqa: E402
                                      vocab_map_lines, write_vocab_map)
from attnmt.errors import AttnmtError  # noqa: E402
from attnmt.translator import Translator  # noqa: E402

SOURCES = ["hund katze haus", "rot blau", "mann frau kind ball wasser", "baum", "groß klein auto rot hund katze"]


def _brute_force(pairs, top_k, frequent):
    """The documented map, computed with loops over token strings: {source: [targets]}, frequent list."""
    src_df, tgt_df, tgt_freq, both = {}, {}, {}, {}
    for src, tgt in pairs:
        for s in set(src):
            src_df[s] = src_df.get(s, 0) + 1
        for t in set(tgt):
            tgt_df[t] = tgt_df.get(t, 0) + 1
        for t in tgt:
            tgt_freq[t] = tgt_freq.get(t, 0) + 1
        for s, t in product(set(src), set(tgt)):
            both[s, t] = both.get((s, t), 0) + 1
    table = {}
    for s in src_df:
        cands = [(2 * both[s, t] / (src_df[s] + tgt_df[t]), both[s, t], t) for t in tgt_df if (s, t) in both]
        table[s] = cands
    return both, src_df, tgt_df, tgt_freq, table


def test_lines_follow_dice_and_frequency():
    src_vocab = Vocab([*Vocab.SPECIALS, "a", "b", "c", "d", "e"])
    tgt_vocab = Vocab([*Vocab.SPECIALS, "x", "y", "z", "w", "v"])
    pairs = [("a b", "x y"), ("a", "x"), ("b c", "y z z"), ("c", "z"), ("a c", "x z"), ("b", "v v v y"),
             ("d", "w z"), ("d", "w z"), ("d", "z")]
    token_pairs = [(s.split(), t.split()) for s, t in pairs]
    counts = count_cooccurrence([(src_vocab.encode(s), tgt_vocab.encode(t)) for s, t in token_pairs],
                                len(src_vocab), len(tgt_vocab))
    lines = vocab_map_lines(counts, src_vocab, tgt_vocab, VocabMapSettings(top_k=2, frequent=3))
    both, src_df, tgt_df, tgt_freq, table = _brute_force(token_pairs, 2, 3)
    # the empty source: the 3 most frequent target tokens (ties by id): z 4, then x, y, v 3 each
    frequent = sorted(tgt_freq, key=lambda t: (-tgt_freq[t], tgt_vocab.stoi[t]))[:3]
    assert lines[0] == "\t" + " ".join(frequent)
    assert frequent == ["z", "x", "y"]
    got = {line.split("\t")[0]: line.split("\t")[1].split() for line in lines[1:]}
    assert set(got) == {"a", "b", "c", "d"}  # "e" never occurs
    for s, cands in table.items():
        best = [t for _, _, t in sorted(cands, key=lambda c: (-c[0], -c[1], tgt_vocab.stoi[c[2]]))[:2]]
        assert got[s] == best, s
    assert got["a"] == ["x", "y"]  # x: 2*3/(3+3) = 1; y: 2*1/(3+3)
    assert got["d"] == ["w", "z"]  # Dice, not counts: w 2*2/(3+2) = 0.8 (2 together), z 2*3/(3+6) = 0.67 (3)


def test_chunks_merge_like_one_count(monkeypatch):
    rng = np.random.default_rng(0)
    pairs = [(rng.integers(4, 20, rng.integers(1, 6)), rng.integers(4, 15, rng.integers(1, 6))) for _ in range(50)]
    whole = count_cooccurrence(pairs, 20, 15)
    monkeypatch.setattr(cooccurrence, "CHUNK", 7)
    chunked = count_cooccurrence(pairs, 20, 15)
    for name in ("src", "tgt", "both", "src_sentences", "tgt_sentences", "tgt_tokens"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(chunked, name))
    dense = np.zeros((20, 15), np.int64)
    for s, t in pairs:
        for i, j in product(set(s.tolist()), set(t.tolist())):
            dense[i, j] += 1
    np.testing.assert_array_equal(dense[whole.src, whole.tgt], whole.both)
    assert whole.both.sum() == dense.sum()


def _export_with_map(run, out, lines):
    export_run(run, out)
    write_vocab_map(out / "vmap.txt", lines)
    return out


def test_ctranslate2_reads_the_map(tmp_path, random_run):
    """Random weights decode to the budget over the whole vocabulary; a map allowing two words
    keeps every output token among them (and <unk>/<eos>, which CTranslate2 always allows)."""
    run = random_run(tmp_path / "run")
    out = _export_with_map(run, tmp_path / "ct2", ["\tdog cat"])
    with_map = Translator.load(out, engine="ctranslate2")
    assert with_map.engine.use_vmap
    tokens = {t for r in with_map.translate(SOURCES, beam_size=1, replace_unk=False) for t in r.tokens}
    assert tokens and tokens <= {"dog", "cat", "<unk>"}
    without = Translator.load(out, engine="ctranslate2")
    without.engine.use_vmap = False
    tokens = {t for r in without.translate(SOURCES, beam_size=1, replace_unk=False) for t in r.tokens}
    assert tokens - {"dog", "cat", "<unk>"}


@pytest.mark.parametrize("beam", [1, 5])
def test_a_full_map_changes_nothing(tmp_path, random_run, beam):
    run = random_run(tmp_path / "run")
    plain = Translator.load(export_run(run, tmp_path / "plain"), engine="ctranslate2")
    vocab = plain.pipeline.tgt_vocab
    full = Translator.load(_export_with_map(run, tmp_path / "full", full_vocab_map_lines(vocab)),
                           engine="ctranslate2")
    assert full.engine.use_vmap and not plain.engine.use_vmap
    for a, b in zip(plain.translate(SOURCES, beam_size=beam), full.translate(SOURCES, beam_size=beam)):
        assert a.tokens == b.tokens
        assert abs(a.score - b.score) < 1e-4


def test_export_vocab_map_from_training_data(tmp_path, prenorm_run):
    out = tmp_path / "ct2"
    assert main(["export", str(prenorm_run), "-o", str(out), "--quantization", "int8", "--vocab-map",
                 "--vocab-map-top-k", "3", "--vocab-map-frequent", "5"]) == 0
    lines = (out / "vmap.txt").read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("\t") and len(lines[0].split()) == 5
    table = {line.split("\t")[0]: line.split("\t")[1].split() for line in lines[1:]}
    # the reversal task translates word for word: each German word's first candidate is its English word
    for de, en in zip(toy.SRC_WORDS, toy.TGT_WORDS):
        assert table[de][0] == en, (de, table[de])
        assert len(table[de]) == 3
    info = json.loads((out / "attnmt_export.json").read_text())
    assert info["vocab_map"] == {"top_k": 3, "frequent": 5, "source_tokens": len(lines) - 1}
    assert "vmap.txt" in json.loads((out / "checksums.json").read_text())
    translator = Translator.load(out, engine="ctranslate2")
    assert translator.engine.use_vmap
    assert translator.translate(["hund katze"], beam_size=1)[0].text == "cat dog"


def test_vocab_map_needs_training_data(tmp_path, random_run):
    run = random_run(tmp_path / "run")
    with pytest.raises(AttnmtError, match="no prepared.json"):
        export_run(run, tmp_path / "ct2", vocab_map=VocabMapSettings())
    assert not (tmp_path / "ct2").exists()


def test_use_vmap_without_a_map_is_refused(tmp_path, random_run):
    from attnmt.engines.ctranslate2 import load_export

    out = export_run(random_run(tmp_path / "run"), tmp_path / "ct2")
    with pytest.raises(AttnmtError, match="no vocabulary map"):
        load_export(out, use_vmap=True)
