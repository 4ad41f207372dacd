"""Vocab: specials, deterministic order, min_freq, max_size, encode/decode, JSON round trip."""

from __future__ import annotations

import json

import pytest
import torch
from support.fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from attnmt.data.vocab import Vocab
from attnmt.errors import DataError

SENTENCES = [["b", "a", "c"], ["a", "b", "d"], ["a", "e", "c"], ["<unk>", "b"]]


def test_specials_then_frequency_then_alphabetical():
    vocab = Vocab.build(SENTENCES)
    assert vocab.itos[:4] == ["<pad>", "<unk>", "<bos>", "<eos>"]
    assert (vocab.pad_id, vocab.unk_id, vocab.bos_id, vocab.eos_id) == (0, 1, 2, 3)
    # a:3 b:3 (tie -> string order), c:2, d:1 e:1 (tie); the "<unk>" token is not added twice
    assert vocab.itos[4:] == ["a", "b", "c", "d", "e"]
    assert Vocab.build(reversed(SENTENCES)) == vocab  # order of the data does not matter


def test_min_freq_and_max_size():
    assert Vocab.build(SENTENCES, min_freq=2).itos[4:] == ["a", "b", "c"]
    vocab = Vocab.build(SENTENCES, max_size=2)
    assert vocab.itos[4:] == ["a", "b"] and len(vocab) == 6
    assert "a" in vocab and "e" not in vocab


def test_encode_decode():
    vocab = Vocab.build(SENTENCES)
    ids = vocab.encode(["a", "zzz", "c"], add_bos=True, add_eos=True)
    assert ids == [2, 4, 1, 6, 3]
    assert vocab.decode(ids + [5, 0]) == ["a", "<unk>", "c"]  # stops at <eos>
    assert vocab.decode(torch.tensor([2, 4, 0, 5])) == ["a", "b"]
    assert vocab.decode([2, 4, 3, 5], strip_special=False) == ["<bos>", "a", "<eos>", "b"]
    with pytest.raises(ValueError, match="id 99 outside the vocabulary of 9 tokens"):
        vocab.decode([99])


def test_save_load_and_dict(tmp_path):
    vocab = Vocab.build([["ß", "ü", "a"]])
    vocab.save(tmp_path / "vocab.json")
    assert Vocab.load(tmp_path / "vocab.json") == vocab
    assert Vocab.from_dict(vocab.to_dict()).itos == vocab.itos


def test_load_errors(tmp_path):
    with pytest.raises(DataError, match=r"missing\.json: vocabulary file not found"):
        Vocab.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(DataError, match=r"bad\.json: not a JSON vocabulary"):
        Vocab.load(tmp_path / "bad.json")
    (tmp_path / "wrong.json").write_text('{"tokens": ["a", "b"]}')
    with pytest.raises(DataError, match=r"wrong\.json: a vocabulary starts with"):
        Vocab.load(tmp_path / "wrong.json")


def test_a_vocabulary_in_its_own_order_names_its_specials(tmp_path):
    """Marian's order: </s>=0, <unk>=1, ..., <pad> last, decoding starting from <pad>."""
    tokens = ["</s>", "<unk>", "▁a", "b", "<pad>"]
    vocab = Vocab(tokens, specials={"pad": "<pad>", "unk": "<unk>", "bos": "<pad>", "eos": "</s>"},
                  suppressed=["<pad>"])
    assert (vocab.pad_id, vocab.unk_id, vocab.bos_id, vocab.eos_id) == (4, 1, 4, 0)
    assert (vocab.PAD, vocab.EOS, vocab.suppressed_ids) == ("<pad>", "</s>", (4,))
    assert vocab.encode(["▁a", "zz"], add_eos=True) == [2, 1, 0]
    assert vocab.decode([4, 2, 3, 0, 2]) == ["▁a", "b"]  # the start (pad) dropped, stops at </s>
    vocab.save(tmp_path / "v.json")
    assert Vocab.load(tmp_path / "v.json") == vocab
    assert Vocab.load(tmp_path / "v.json") != Vocab(tokens, specials=vocab.specials)  # suppressed differs
    assert Vocab.build([["a"]]).to_dict() == {"tokens": ["<pad>", "<unk>", "<bos>", "<eos>", "a"]}  # unchanged


@pytest.mark.parametrize("specials,suppressed,match", [
    ({"pad": "<pad>", "unk": "<unk>", "bos": "<pad>"}, [], "specials must name a token for each of"),
    ({"pad": "<pad>", "unk": "<unk>", "bos": "<pad>", "eos": "<e>"}, [], "not in the vocabulary"),
    ({"pad": "<pad>", "unk": "<unk>", "bos": "</s>", "eos": "</s>"}, [], "bos one of its own or pad"),
    ({"pad": "<pad>", "unk": "<unk>", "bos": "<pad>", "eos": "</s>"}, ["zz"], "suppressed tokens"),
    ({"pad": ["<pad>"], "unk": "<unk>", "bos": "<pad>", "eos": "</s>"}, [], "specials must name"),
])
def test_bad_specials_are_refused(tmp_path, specials, suppressed, match):
    path = tmp_path / "v.json"
    path.write_text(json.dumps({"tokens": ["</s>", "<unk>", "<pad>"], "specials": specials,
                                "suppressed": suppressed}), encoding="utf-8")
    with pytest.raises(DataError, match=match):
        Vocab.load(path)


@fuzz(ci=60, deep=2000)
@given(st.dictionaries(st.sampled_from(["tokens", "specials", "suppressed"]),
                       st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                                    lambda inner: st.lists(inner, max_size=5)
                                    | st.dictionaries(st.sampled_from(["pad", "unk", "bos", "eos", "x"]), inner,
                                                      max_size=5), max_leaves=12)))
def test_any_vocabulary_file_loads_or_is_refused_by_name(tmp_path_factory, document):
    path = tmp_path_factory.mktemp("fuzz") / "v.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    try:
        Vocab.load(path)
    except DataError as err:
        assert str(path) in str(err)
