"""Tiny Transformer runs for the engine tests: trained ones (a word-reversal task, seconds) and
untrained ones with random weights (every mapping difference shows up in their scores)."""

import pytest

from support import toy
from support.once import once
from support.toy import make_random_run


def train_transformer(base, *, pre_norm: bool, tie: bool, epochs: int = 10):
    """Train a tiny Transformer on the reversal task with `attnmt train`; returns its run directory."""
    from attnmt.cli import main

    config = toy.write_config(base / "reversal.yaml", "reversal", "transformer", epochs=epochs, batch_size=32,
                              beam_size=5, model=dict(pre_norm=pre_norm, tie_embeddings=tie),
                              train=dict(log_every=100, eval_max_sentences=8), search=dict(length_penalty=1.0))
    run_dir = base / "run"
    assert main(["train", str(config), "--run-dir", str(run_dir)]) == 0
    return run_dir


@pytest.fixture(scope="session")
def prenorm_run(tmp_path_factory):
    """Pre-norm, tied output layer: trained once per session."""
    return once(tmp_path_factory, "prenorm_run", lambda base: train_transformer(base, pre_norm=True, tie=True))


@pytest.fixture(scope="session")
def postnorm_run(tmp_path_factory):
    """Post-norm, untied output layer: trained once per session."""
    return once(tmp_path_factory, "postnorm_run",
                lambda base: train_transformer(base, pre_norm=False, tie=False, epochs=6))


@pytest.fixture
def random_run():
    """make_random_run, for tests."""
    return make_random_run


@pytest.fixture
def pieces_run(tmp_path, random_run):
    """A random-weights run whose sentencepiece vocabulary was learned on sentence-case and
    lowercase text only: a word in capitals is cut into single letters. Returns (run, export,
    the sentencepiece processor). Needs ctranslate2 (its tests skip without it)."""
    import sentencepiece

    from attnmt.data.tokenizers import SentencePieceTokenizer, train_sentencepiece
    from attnmt.engines.ctranslate2_export import export_run
    from support.toy import SRC_WORDS, TGT_WORDS, copy_pairs

    texts = [text for source, target in copy_pairs(300, seed=5) for text in (source, target)]
    texts += [text[:1].upper() + text[1:] for text in texts] + [" ".join(SRC_WORDS + TGT_WORDS)]
    model = train_sentencepiece(texts, vocab_size=160, cache_dir=tmp_path / "spm")
    run = random_run(tmp_path / "run", tokenizer=SentencePieceTokenizer(model))
    return run, export_run(run, tmp_path / "ct2"), sentencepiece.SentencePieceProcessor(model_file=str(model))
