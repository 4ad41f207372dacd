"""Sequence-to-sequence models: the Bahdanau RNN (rnn.py) and the Transformer (transformer.py).

Every model exposes the same decoding interface (see docs/architecture.md):
``encode``, ``init_state``, ``decode_step``, ``reorder_state`` and a teacher-forced ``forward``.
`build_model` is the one place that maps a `ModelConfig` to a module.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from torch import nn


def build_model(cfg, src_vocab_size: int, tgt_vocab_size: int, *, pad_id: int = 0, bos_id: int = 2,
                eos_id: int = 3) -> nn.Module:
    """Build the model a `ModelConfig` describes."""
    if cfg.arch == "rnn":
        from attnmt.models.rnn import RNNSeq2Seq

        return RNNSeq2Seq(
            src_vocab_size, tgt_vocab_size, emb_dim=cfg.emb_dim, enc_hidden=cfg.enc_hidden,
            dec_hidden=cfg.dec_hidden, attn_dim=cfg.attn_dim, layers=cfg.layers, dropout=cfg.dropout,
            attention=cfg.attention, tie_embeddings=cfg.tie_embeddings, pad_id=pad_id, bos_id=bos_id,
            eos_id=eos_id,
        )
    if cfg.arch == "transformer":
        from attnmt.models.transformer import TransformerSeq2Seq

        return TransformerSeq2Seq(
            src_vocab_size, tgt_vocab_size, d_model=cfg.d_model, heads=cfg.heads, ff_dim=cfg.ff_dim,
            enc_layers=cfg.enc_layers, dec_layers=cfg.dec_layers, dropout=cfg.dropout,
            attn_dropout=cfg.attn_dropout, positions=cfg.positions, pre_norm=cfg.pre_norm,
            share_embeddings=cfg.share_embeddings, tie_embeddings=cfg.tie_embeddings, activation=cfg.activation,
            scale_embeddings=cfg.scale_embeddings, ff_dropout=cfg.ff_dropout, pad_id=pad_id, bos_id=bos_id,
            eos_id=eos_id,
        )
    raise ValueError(f"unknown model.arch {cfg.arch!r}")


def count_parameters(model: nn.Module) -> int:
    """Number of distinct trainable parameters (tied weights counted once)."""
    seen, total = set(), 0
    for p in model.parameters():
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """The model in eval mode inside the block; its train/eval mode is restored after, also on an error."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
