"""Tiny Transformer runs for the engine tests: trained ones (a word-reversal task, seconds) and
untrained ones with random weights (every mapping difference shows up in their scores)."""

import pytest
import torch

import toy


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
    return train_transformer(tmp_path_factory.mktemp("prenorm"), pre_norm=True, tie=True)


@pytest.fixture(scope="session")
def postnorm_run(tmp_path_factory):
    """Post-norm, untied output layer: trained once per session."""
    return train_transformer(tmp_path_factory.mktemp("postnorm"), pre_norm=False, tie=False, epochs=6)


def make_random_run(run_dir, *, pre_norm=True, share=False, tie=False, positions="sinusoidal", seed=0):
    """A Transformer run directory with random weights (no training), moses words, and one
    vocabulary for both sides (so that source and target embeddings can be shared)."""
    from attnmt.checkpoint import save_weights, write_json
    from attnmt.config import config_from_dict
    from attnmt.data.pipeline import TextPipeline
    from attnmt.data.tokenizers import MosesTokenizer
    from attnmt.data.vocab import Vocab
    from attnmt.models import build_model

    run_dir.mkdir(parents=True)
    vocab = Vocab([*Vocab.SPECIALS, *dict.fromkeys(toy.SRC_WORDS + toy.TGT_WORDS)])
    cfg = config_from_dict({"model": dict(arch="transformer", d_model=32, heads=4, ff_dim=48, enc_layers=2,
                                          dec_layers=3, pre_norm=pre_norm, share_embeddings=share,
                                          tie_embeddings=tie, positions=positions, dropout=0.0)})
    write_json(run_dir / "config.json", cfg.to_dict())
    TextPipeline(MosesTokenizer("de"), MosesTokenizer("en"), vocab, vocab).save(run_dir)
    torch.manual_seed(seed)
    model = build_model(cfg.model, len(vocab), len(vocab))
    with torch.no_grad():  # perturb everything (LayerNorms, biases) so that no mapping hides behind 0 or 1
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    save_weights(model, run_dir / "checkpoints" / "random.safetensors")
    write_json(run_dir / "best.json", {"file": "checkpoints/random.safetensors"})
    return run_dir


@pytest.fixture
def random_run():
    """make_random_run, for tests."""
    return make_random_run
