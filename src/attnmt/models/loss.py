"""The training objective: summed token cross-entropy over real (unpadded) target tokens.

Shapes:
    batch    sentences in a batch
    tgt_len  padded target length
    vocab    target vocabulary size
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sequence_loss(logits: torch.Tensor, tgt_out: torch.Tensor, *, pad_id: int,
                  label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over real target tokens (padding ignored).

    Args:
        logits: (batch, tgt_len, vocab)
        tgt_out: (batch, tgt_len) gold next tokens, `pad_id` where padded.
    """
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), tgt_out.reshape(-1),
                           ignore_index=pad_id, label_smoothing=label_smoothing, reduction="sum")
