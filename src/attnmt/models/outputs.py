"""What every model returns, and the check of its source inputs (shared by both models).

Shapes:
    batch: sentences; src_len, tgt_len: source / target positions; enc_dim: encoder state size;
    hidden: decoder state size; vocab: target vocabulary size.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class EncoderOutput(NamedTuple):
    """What the encoder hands the decoder.

    Attributes:
        states: (batch, src_len, enc_dim) annotations h_j = [h_fwd_j; h_bwd_j], zero on padding.
        mask: (batch, src_len) bool, True = real token.
        final: (batch, hidden) initial decoder state s_0.
    """

    states: Tensor
    mask: Tensor
    final: Tensor


class ModelOutput(NamedTuple):
    """Teacher-forced pass: logits (batch, tgt_len, vocab), attention (batch, tgt_len, src_len)."""

    logits: Tensor
    attention: Tensor


def check_source(src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor) -> None:
    """Raise ValueError unless ids/mask are (batch, src_len) and lengths are (batch,)."""
    got = (f"src_ids {tuple(src_ids.shape)}, src_mask {tuple(src_mask.shape)} {src_mask.dtype}, "
           f"src_lengths {tuple(src_lengths.shape)}")
    if src_ids.dim() != 2 or src_mask.shape != src_ids.shape or src_mask.dtype != torch.bool:
        raise ValueError(f"expected src_ids and bool src_mask of shape (batch, src_len); got {got}")
    if src_lengths.shape != (src_ids.shape[0],):
        raise ValueError(f"expected src_lengths of shape (batch,); got {got}")
