"""An ensemble of trained models behind the one decoding interface, so that decoding/search.py, scoring
and the corpus loss use it unchanged (as fairseq's EnsembleModel and OpenNMT-py's
onmt/model_builder ensembles do).

At every step each member predicts from its own state, and the ensemble's distribution is the
mean of the members' probabilities, returned as its logarithm:

    log p(y | ...) = log( 1/M * sum_m p_m(y | ...) ) = logsumexp_m(log p_m) - log M

This is fairseq's choice (EnsembleModel.forward_decoder) and OpenNMT-py's `-avg_raw_probs`;
OpenNMT-py's default and Marian average the log-probabilities instead (a renormalized
geometric mean). The arithmetic mean is kept here because it is itself a distribution (it sums
to 1), so the log-probabilities that beam search ranks, that `score` reports and that
perplexity is computed from are the ensemble's true ones; and one member that is sure a token
is wrong cannot veto it outright. An ensemble of one returns its member's logits unchanged, so
it decodes exactly as the model alone. The attention shown is the mean of the members'.

Members must share the source and target vocabularies (the caller checks the text pipelines:
translator.py); they may differ in architecture and size.

Shapes:
    batch: rows decoded (sentences x beam); src_len, tgt_len: source / target positions;
    vocab: target vocabulary; members: M.
"""

from __future__ import annotations

import inspect
import math
from typing import Sequence

import torch
from torch import Tensor, nn

from attnmt.models.outputs import ModelOutput

__all__ = ["EnsembleModel", "mean_probability_log"]


def mean_probability_log(logits: Sequence[Tensor]) -> Tensor:
    """log of the mean of the members' softmax distributions; one member's logits pass unchanged.

    Args:
        logits: M tensors (..., vocab) with the same shape.

    Returns:
        (..., vocab) log-probabilities in at least float32 (unnormalized logits when M = 1).
    """
    if len(logits) == 1:
        return logits[0]
    dtype = torch.promote_types(logits[0].dtype, torch.float32)
    log_probs = torch.stack([x.to(dtype).log_softmax(dim=-1) for x in logits])  # (members, ..., vocab)
    return log_probs.logsumexp(dim=0) - math.log(len(logits))  # (..., vocab)


def _mean(tensors: Sequence[Tensor]) -> Tensor:
    """Elementwise mean of same-shaped tensors (one tensor passes unchanged)."""
    if len(tensors) == 1:
        return tensors[0]
    return torch.stack(list(tensors)).mean(dim=0)


def _attention_request(member: nn.Module, need_attention: bool) -> dict:
    """`need_attention` as a keyword for a member whose forward takes it (the Transformer)."""
    takes_it = "need_attention" in inspect.signature(member.forward).parameters
    return {"need_attention": need_attention} if takes_it else {}


class EnsembleModel(nn.Module):
    """Several encoder-decoders decoding together: the models' decoding interface over M members.

    The encoder output and the decoder state are tuples with one entry per member, each the
    member's own (search never looks inside them).

    Args:
        members: models with the decoding interface and the same target vocabulary size.

    Raises:
        ValueError: no member.
    """

    def __init__(self, members: Sequence[nn.Module]):
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one model")
        self.members = nn.ModuleList(members)

    def encode(self, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor) -> tuple:
        """Each member's EncoderOutput; src_ids, src_mask (batch, src_len), src_lengths (batch,)."""
        return tuple(m.encode(src_ids, src_mask, src_lengths) for m in self.members)

    def init_state(self, enc: tuple) -> tuple:
        return tuple(m.init_state(e) for m, e in zip(self.members, enc))

    def decode_step(self, prev_ids: Tensor, state: tuple) -> tuple[Tensor, tuple, Tensor]:
        """One step of every member: prev_ids (batch,) -> log-probabilities (batch, vocab), the
        new state, and the members' mean attention (batch, src_len)."""
        outputs = [m.decode_step(prev_ids, s) for m, s in zip(self.members, state)]
        logits = mean_probability_log([logits for logits, _, _ in outputs])  # (batch, vocab)
        attn = _mean([a for _, _, a in outputs])  # (batch, src_len)
        return logits, tuple(s for _, s, _ in outputs), attn

    def reorder_state(self, state: tuple, index: Tensor, *, within_sentences: bool = False) -> tuple:
        return tuple(m.reorder_state(s, index, within_sentences=within_sentences)
                     for m, s in zip(self.members, state))

    def forward(self, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor, tgt_in: Tensor, *,
                need_attention: bool = False) -> ModelOutput:
        """Teacher-forced pass: log-probabilities (batch, tgt_len, vocab) and the members' mean
        attention (batch, tgt_len, src_len), or None when a member gives none (a Transformer
        gives it only with `need_attention`, which is passed to the members that take it)."""
        outputs = [m(src_ids, src_mask, src_lengths, tgt_in, **_attention_request(m, need_attention))
                   for m in self.members]
        attention = [o.attention for o in outputs]
        mean_attention = None if any(a is None for a in attention) else _mean(attention)
        return ModelOutput(mean_probability_log([o.logits for o in outputs]), mean_attention)

    def set_attention_view(self, *, layer: int | None = None, head: int | None = None) -> None:
        """Pick the Transformer cross-attention every member reports (None: the mean).

        Raises:
            ValueError: a member is not a Transformer.
        """
        if not all(hasattr(m, "set_attention_view") for m in self.members):
            raise ValueError("layer/head selection needs a Transformer model: every member of the ensemble must be one")
        for member in self.members:
            member.set_attention_view(layer=layer, head=head)
