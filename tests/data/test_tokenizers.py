"""Moses and sentencepiece tokenizers: round trips, lowercasing, cached training, settings."""

from __future__ import annotations

import random

import pytest

from attnmt.data.tokenizers import (MosesTokenizer, SentencePieceTokenizer, Tokenizer, tokenizer_from_dict,
                                    train_sentencepiece)
from attnmt.errors import DataError


@pytest.mark.parametrize(("lang", "text"), [
    ("en", "A man in a blue shirt is standing on a ladder."),
    ("en", "Two dogs, one brown and one white, play in the snow!"),
    ("de", "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."),
    ("fr", "Un homme est debout sur une échelle."),
])
def test_moses_round_trip(lang, text):
    tok = MosesTokenizer(lang)
    tokens = tok.tokenize(text)
    assert tokens[-1] in ".!" and tokens[-2] != "."
    assert tok.detokenize(tokens) == text


def test_moses_keeps_specials_unescaped_and_dashes():
    tokens = MosesTokenizer("en").tokenize('A "well-known" dog & cat')
    assert "&" in tokens and '"' in tokens and "well-known" in tokens


def test_moses_lowercase():
    tok = MosesTokenizer("de", lowercase=True)
    assert tok.tokenize("Ein Hund LÄUFT.") == ["ein", "hund", "läuft", "."]
    assert tokenizer_from_dict(tok.to_dict(), ".").tokenize("Ein Hund") == ["ein", "hund"]
    assert isinstance(tok, Tokenizer)


def tiny_corpus(n=300):
    rng = random.Random(0)
    words = ["the", "cat", "dog", "sits", "runs", "on", "a", "red", "blue", "mat", "house", "garden"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 8))) for _ in range(n)]


def test_sentencepiece_lowercase_encodes_the_lowercased_text_and_is_kept_in_its_settings(tmp_path):
    model = train_sentencepiece(tiny_corpus(), vocab_size=60, cache_dir=tmp_path)
    plain, lower = SentencePieceTokenizer(model), SentencePieceTokenizer(model, lowercase=True)
    assert lower.tokenize("The RED Cat sits") == plain.tokenize("the red cat sits")
    assert lower.piece_ids(["The RED Cat", "a Mat"]) == plain.piece_ids(["the red cat", "a mat"])
    assert "lowercase" not in plain.to_dict()  # settings written before the option existed read the same
    assert lower.to_dict() == {"type": "sentencepiece", "model_file": model.name, "lowercase": True}
    again = tokenizer_from_dict(lower.to_dict(), tmp_path)
    assert again.lowercase and again.tokenize("A DOG") == plain.tokenize("a dog")
    (tmp_path / "copy").mkdir()
    assert lower.copy_model_to(tmp_path / "copy").lowercase
    with pytest.raises(DataError, match="'lowercase' must be true or false, got 'yes'"):
        tokenizer_from_dict({**lower.to_dict(), "lowercase": "yes"}, tmp_path, source="tokenizers.json: src")


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_sentencepiece_trains_round_trips_and_is_cached(tmp_path, monkeypatch, model_type):
    texts = tiny_corpus()
    model = train_sentencepiece(texts, vocab_size=60, model_type=model_type, cache_dir=tmp_path)
    assert model.is_file() and model.parent == tmp_path
    tok = SentencePieceTokenizer(model)
    pieces = tok.tokenize("the red cat sits on a mat")
    assert all(isinstance(p, str) for p in pieces) and pieces[0].startswith("▁")
    assert tok.detokenize(pieces) == "the red cat sits on a mat"

    def no_training(**kwargs):
        raise AssertionError("a cached model was trained again")

    import sentencepiece as spm
    monkeypatch.setattr(spm.SentencePieceTrainer, "train", no_training)
    # a cache hit: the same file, and no training (no_training would raise)
    assert train_sentencepiece(texts, vocab_size=60, model_type=model_type, cache_dir=tmp_path) == model


def test_sentencepiece_cache_key_depends_on_data_and_settings(tmp_path):
    texts = tiny_corpus()
    a = train_sentencepiece(texts, vocab_size=50, cache_dir=tmp_path)
    assert train_sentencepiece(texts[:-1], vocab_size=50, cache_dir=tmp_path) != a
    assert train_sentencepiece(texts, vocab_size=51, cache_dir=tmp_path) != a
    assert not list(tmp_path.glob(".spm-*"))  # no temp folders left behind


def test_sentencepiece_vocab_too_big_for_tiny_corpus(tmp_path):
    model = train_sentencepiece(["a b c", "b c d"], vocab_size=5000, cache_dir=tmp_path)
    assert 0 < SentencePieceTokenizer(model).vocab_size < 5000


def test_sentencepiece_errors(tmp_path):
    with pytest.raises(DataError, match="empty corpus"):
        train_sentencepiece(["", "  "], vocab_size=10, cache_dir=tmp_path)
    with pytest.raises(DataError, match="model_type='word'"):
        train_sentencepiece(["a"], vocab_size=10, model_type="word", cache_dir=tmp_path)
    with pytest.raises(DataError, match="sentencepiece training failed.*vocab_size=5"):
        train_sentencepiece(["abcdefghijklmnop"], vocab_size=5, cache_dir=tmp_path)
    with pytest.raises(DataError, match=r"missing\.model: sentencepiece model not found"):
        SentencePieceTokenizer(tmp_path / "missing.model")


def test_sentencepiece_settings_round_trip(tmp_path):
    model = train_sentencepiece(tiny_corpus(), vocab_size=40, cache_dir=tmp_path / "cache")
    run_dir = tmp_path / "run"
    tok = SentencePieceTokenizer(model).copy_model_to(run_dir)
    d = tok.to_dict()
    assert d == {"type": "sentencepiece", "model_file": model.name}
    again = tokenizer_from_dict(d, run_dir)
    assert again.tokenize("the blue dog") == tok.tokenize("the blue dog")
    assert SentencePieceTokenizer(model).to_dict(base_dir=tmp_path)["model_file"] == f"cache/{model.name}"


def test_tokenizer_from_dict_errors():
    with pytest.raises(DataError, match="unknown tokenizer type 'bpe'"):
        tokenizer_from_dict({"type": "bpe"}, ".")
    with pytest.raises(DataError, match="'lang' must be a language code, got None"):
        tokenizer_from_dict({"type": "moses"}, ".")
    with pytest.raises(DataError, match="'model_file' must name a sentencepiece model, got 5"):
        tokenizer_from_dict({"type": "sentencepiece", "model_file": 5}, ".")


def test_a_model_file_outside_the_run_is_refused_before_it_is_opened(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    opened = []
    monkeypatch.setattr(SentencePieceTokenizer, "__init__", lambda self, path: opened.append(path))
    for outside in ("../elsewhere.model", "/etc/passwd", "sub/../../x.model"):
        with pytest.raises(DataError, match=f"model_file '{outside}' is outside"):
            tokenizer_from_dict({"type": "sentencepiece", "model_file": outside}, run_dir)
    assert opened == []
