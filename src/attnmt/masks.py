"""Masks: the one place they are built. One polarity everywhere: True = a real token / may attend
(the same as SDPA's boolean masks). Batching builds padding masks here, attention and the
Transformer build causal masks here; neither imports the other.

Shapes:
    batch: sentences; max_len: mask width (src_len or tgt_len); tgt_len: decoder positions.
"""

from __future__ import annotations

import torch
from torch import Tensor


def lengths_to_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """Build a padding mask from sequence lengths (the one place masks are built).

    Args:
        lengths: (batch,) integer lengths.
        max_len: width of the mask; defaults to ``lengths.max()``.

    Returns:
        (batch, max_len) bool, True = real token.

    Raises:
        ValueError: lengths not 1-D integers, negative, or longer than ``max_len``.
    """
    if lengths.dim() != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(
            f"lengths must be a 1-D integer tensor (batch,), got shape {tuple(lengths.shape)} "
            f"dtype {lengths.dtype}"
        )
    longest = int(lengths.max()) if lengths.numel() else 0
    if lengths.numel() and int(lengths.min()) < 0:
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    if max_len is None:
        max_len = longest
    elif max_len < longest:
        raise ValueError(f"max_len={max_len} is shorter than the longest length {longest}")
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)  # (batch, max_len)


def causal_mask(tgt_len: int, device: torch.device | str | None = None) -> Tensor:
    """Lower-triangular mask: position i may attend to positions j <= i.

    Returns:
        (tgt_len, tgt_len) bool, True = may attend. Add ``[None]`` to use it with batched inputs,
        or combine with padding: ``src_mask[:, None, :] & causal_mask(t, device)``.
    """
    return torch.ones(tgt_len, tgt_len, dtype=torch.bool, device=device).tril()
