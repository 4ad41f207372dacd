"""Attention: additive (Bahdanau), dot and general (Luong), scaled dot-product and multi-head.

Shapes:
    batch: sentences in the batch.
    src_len: positions that can be attended (keys / values).
    tgt_len: query positions; a single decoder step has no tgt_len dimension.
    hidden: feature size (q_dim, k_dim, v_dim, attn_dim, d_model where named).
    heads: attention heads; head_dim = d_model // heads.

Every variant has one call signature, ``forward(query, keys, values=None, mask=None)
-> AttentionOutput(context, weights)``:

    query   (batch, q_dim) one step, or (batch, tgt_len, q_dim)
    keys    (batch, src_len, k_dim); values (batch, src_len, v_dim), default keys
    mask    bool, True = may attend: (batch, src_len) padding, or (batch, tgt_len, src_len)
            (a leading 1 broadcasts over the batch, e.g. ``causal_mask(t, device)[None]``)
    context (batch, v_dim) or (batch, tgt_len, v_dim)
    weights (batch, src_len) or (batch, tgt_len, src_len)

Unbatched inputs drop the batch dimension everywhere (keys (src_len, k_dim), mask (src_len,) or
(tgt_len, src_len)). Weights are exactly 0 on masked positions; a row with nothing to attend
gives zero weights and zero context. See docs/attention.md.
"""

from __future__ import annotations

import logging
import math
from contextlib import nullcontext
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnmt.masks import causal_mask, lengths_to_mask

logger = logging.getLogger(__name__)

__all__ = [
    "AttentionOutput", "lengths_to_mask", "causal_mask", "AdditiveAttention", "DotAttention",
    "GeneralAttention", "MultiHeadAttention", "scaled_dot_product",
]


class AttentionOutput(NamedTuple):
    """What every attention returns.

    Attributes:
        context: (batch, v_dim) for one step or (batch, tgt_len, v_dim).
        weights: (batch, src_len) or (batch, tgt_len, src_len); multi-head attention with
            ``average_heads=False`` gives (batch, heads, tgt_len, src_len), and None only
            when ``need_weights=False`` was asked for.
    """

    context: Tensor
    weights: Tensor | None


class _Batched(NamedTuple):
    """Inputs brought to the full batched layout, and how to undo it."""

    query: Tensor  # (batch, tgt_len, q_dim)
    keys: Tensor | None  # (batch, src_len, k_dim)
    values: Tensor | None  # (batch, src_len, v_dim)
    mask: Tensor | None  # (batch or 1, tgt_len or 1, src_len)
    one_step: bool  # query had no tgt_len dimension
    unbatched: bool  # inputs had no batch dimension


def _shape(t: Tensor | None) -> tuple | None:
    return None if t is None else tuple(t.shape)


def _prepare(
    query: Tensor,
    keys: Tensor | None,
    values: Tensor | None,
    mask: Tensor | None,
    *,
    query_dim: int | None,
    key_dim: int | None,
    value_dim: int | None = None,
    kv_layout: tuple[bool, int] | None = None,
) -> _Batched:
    """Check shapes and dtypes, then add the batch and tgt_len dimensions where missing.

    Batched or not is read from keys, else from ``kv_layout = (batched, src_len)``.
    """
    shapes = (_shape(query), _shape(keys), _shape(values), _shape(mask))
    got = "query {}, keys {}, values {}, mask {}".format(*shapes)
    if keys is not None and keys.dim() not in (2, 3):
        raise ValueError(f"keys must be (batch, src_len, k_dim) or (src_len, k_dim); got {got}")
    batched, src_len = kv_layout if keys is None else (keys.dim() == 3, keys.shape[-2])
    lead = 1 if batched else 0
    if query.dim() not in (lead + 1, lead + 2):
        layout = "(batch, [tgt_len,] q_dim)" if batched else "([tgt_len,] q_dim)"
        raise ValueError(f"query must be {layout}; got {got}")
    one_step = query.dim() == lead + 1
    if not query.is_floating_point():
        raise ValueError(f"query must be a floating-point tensor, got dtype {query.dtype}; {got}")
    if query_dim is not None and query.shape[-1] != query_dim:
        raise ValueError(f"query feature size must be {query_dim}; got {got}")
    if keys is not None:
        if key_dim is not None and keys.shape[-1] != key_dim:
            raise ValueError(f"keys feature size must be {key_dim}; got {got}")
        if values is None:
            values = keys
        if values.dim() != keys.dim() or values.shape[:-1] != keys.shape[:-1]:
            raise ValueError(f"values must match keys in all but the last dim; got {got}")
        if value_dim is not None and values.shape[-1] != value_dim:
            raise ValueError(f"values feature size must be {value_dim}; got {got}")
        if keys.dtype != query.dtype or values.dtype != query.dtype:
            raise ValueError(
                f"query, keys and values must share a dtype, got {query.dtype}, {keys.dtype}, "
                f"{values.dtype}; {got}"
            )
        if not batched:
            keys, values = keys.unsqueeze(0), values.unsqueeze(0)  # (1, src_len, hidden)
    if not batched:
        query = query.unsqueeze(0)
    if one_step:
        query = query.unsqueeze(1)  # (batch, 1, q_dim)
    batch, tgt_len = query.shape[0], query.shape[1]
    if keys is not None and keys.shape[0] != batch:
        raise ValueError(f"query and keys must have the same batch size; got {got}")
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be bool (True = may attend), not {mask.dtype}; got {got}")
        if mask.dim() == lead + 1:  # (batch, src_len) padding, or (src_len,) unbatched
            mask = mask.unsqueeze(-2)
        if not batched and mask.dim() == 2:
            mask = mask.unsqueeze(0)  # (1, tgt_len or 1, src_len)
        if mask.dim() != 3 or mask.shape[0] not in (1, batch) or mask.shape[1] not in (1, tgt_len) \
                or mask.shape[2] != src_len:
            raise ValueError(
                f"mask must be (batch, src_len) or (batch or 1, tgt_len, src_len) (unbatched: "
                f"(src_len,) or (tgt_len, src_len)) with batch={batch}, tgt_len={tgt_len}, "
                f"src_len={src_len}; got {got}"
            )
    return _Batched(query, keys, values, mask, one_step, not batched)


def _finish(context: Tensor, weights: Tensor | None, inputs: _Batched) -> AttentionOutput:
    """Drop the tgt_len / batch dimensions that _prepare added."""
    if inputs.one_step:
        context = context.squeeze(-2)  # (batch, v_dim)
        weights = None if weights is None else weights.squeeze(-2)  # (batch, [heads,] src_len)
    if inputs.unbatched:
        context = context.squeeze(0)
        weights = None if weights is None else weights.squeeze(0)
    return AttentionOutput(context, weights)


def _project_keys(key_proj: nn.Linear, keys: Tensor) -> Tensor:
    """(batch, src_len, key_dim) or (src_len, key_dim) -> same with key_proj's output size."""
    if keys.dim() not in (2, 3) or keys.shape[-1] != key_proj.in_features:
        raise ValueError(
            f"keys must be (batch, src_len, {key_proj.in_features}); got keys {tuple(keys.shape)}"
        )
    return key_proj(keys)


def _reuse_projected(projected_keys: Tensor, keys: Tensor, size: int) -> Tensor:
    """Check a ``project_keys(keys)`` result and give it the batch dimension."""
    expected = (*keys.shape[:-1], size)
    if tuple(projected_keys.shape) != expected:
        raise ValueError(
            f"projected_keys must be {expected} (project_keys(keys)); got "
            f"{tuple(projected_keys.shape)} for keys {tuple(keys.shape)}"
        )
    return projected_keys if keys.dim() == 3 else projected_keys.unsqueeze(0)


def _masked_softmax(energy: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax over the last dim that is exactly 0 on masked positions and on empty rows.

    Masked energies are set to the dtype's lowest finite value (not -inf), so an empty row
    gives a finite uniform softmax that the final multiply by the mask turns into zeros:
    no NaN in the forward or the backward pass.
    """
    if mask is None:
        return energy.softmax(dim=-1)
    lowest = torch.finfo(energy.dtype).min
    energy = energy.masked_fill(mask.logical_not(), lowest)
    return energy.softmax(dim=-1) * mask


class AdditiveAttention(nn.Module):
    """Additive attention, Bahdanau et al. 2015 eq. A.1.2: e = v^T tanh(W_q q + W_k k).

    ``project_keys`` computes ``W_k k`` once per source batch; pass it back in at every decoder
    step as ``forward(..., projected_keys=proj)``. Equivalent to one Linear over
    concat[q; k] (weight [W_q, W_k], the key bias), recomputed per step in tutorials.
    """

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int):
        super().__init__()
        self.query_dim, self.key_dim, self.attn_dim = query_dim, key_dim, attn_dim
        self.query_proj = nn.Linear(query_dim, attn_dim, bias=False)
        self.key_proj = nn.Linear(key_dim, attn_dim)
        self.energy = nn.Linear(attn_dim, 1, bias=False)  # v

    def project_keys(self, keys: Tensor) -> Tensor:
        """W_k k, once per source batch: (batch, src_len, key_dim) -> (batch, src_len, attn_dim)."""
        return _project_keys(self.key_proj, keys)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        *,
        projected_keys: Tensor | None = None,
    ) -> AttentionOutput:
        """Attend from query to keys, averaging values.

        Args:
            query: (batch, query_dim) one step, or (batch, tgt_len, query_dim).
            keys: (batch, src_len, key_dim).
            values: (batch, src_len, v_dim); defaults to keys.
            mask: bool, True = may attend; (batch, src_len) or (batch, tgt_len, src_len).
            projected_keys: (batch, src_len, attn_dim) from ``project_keys(keys)``.

        Returns:
            AttentionOutput: context (batch, [tgt_len,] v_dim), weights (batch, [tgt_len,] src_len).
        """
        inputs = _prepare(query, keys, values, mask, query_dim=self.query_dim, key_dim=self.key_dim)
        if projected_keys is None:
            projected_keys = self.key_proj(inputs.keys)  # (batch, src_len, attn_dim)
        else:
            projected_keys = _reuse_projected(projected_keys, keys, self.attn_dim)
        projected_query = self.query_proj(inputs.query)  # (batch, tgt_len, attn_dim)
        summed = projected_query.unsqueeze(2) + projected_keys.unsqueeze(1)
        # summed: (batch, tgt_len, src_len, attn_dim)
        energy = self.energy(torch.tanh(summed)).squeeze(-1)  # (batch, tgt_len, src_len)
        weights = _masked_softmax(energy, inputs.mask)
        context = torch.bmm(weights, inputs.values)  # (batch, tgt_len, v_dim)
        return _finish(context, weights, inputs)


def _dot_product_attend(query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None):
    """Softmax(q k^T) v for (batch, tgt_len, hidden) queries; the caller scales the query."""
    energy = torch.bmm(query, keys.transpose(1, 2))  # (batch, tgt_len, src_len)
    weights = _masked_softmax(energy, mask)
    return torch.bmm(weights, values), weights  # (batch, tgt_len, v_dim)


class DotAttention(nn.Module):
    """Dot attention, Luong et al. 2015 eq. 8 (dot): score(h_t, h_s) = h_t^T h_s.

    Args:
        query_dim, key_dim: optional; when given they are checked (and must be equal).
    """

    def __init__(self, query_dim: int | None = None, key_dim: int | None = None):
        super().__init__()
        dim = query_dim if query_dim is not None else key_dim
        if query_dim is not None and key_dim is not None and query_dim != key_dim:
            raise ValueError(
                f"dot attention needs query_dim == key_dim; got {query_dim}, {key_dim}"
            )
        self.dim = dim

    def forward(
        self, query: Tensor, keys: Tensor, values: Tensor | None = None, mask: Tensor | None = None
    ) -> AttentionOutput:
        """Args and Returns as ``AdditiveAttention.forward``; query and keys share one size."""
        key_dim = self.dim if self.dim is not None else keys.shape[-1]
        inputs = _prepare(query, keys, values, mask, query_dim=key_dim, key_dim=key_dim)
        context, weights = _dot_product_attend(
            inputs.query, inputs.keys, inputs.values, inputs.mask
        )
        return _finish(context, weights, inputs)


class GeneralAttention(nn.Module):
    """General attention, Luong et al. 2015 eq. 8 (general): score(h_t, h_s) = h_t^T W_a h_s.

    ``project_keys`` computes ``W_a h_s`` once per source batch, as for AdditiveAttention.
    """

    def __init__(self, query_dim: int, key_dim: int):
        super().__init__()
        self.query_dim, self.key_dim = query_dim, key_dim
        self.key_proj = nn.Linear(key_dim, query_dim, bias=False)  # W_a

    def project_keys(self, keys: Tensor) -> Tensor:
        """W_a h_s, once per batch: (batch, src_len, key_dim) -> (batch, src_len, query_dim)."""
        return _project_keys(self.key_proj, keys)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        *,
        projected_keys: Tensor | None = None,
    ) -> AttentionOutput:
        """Args and Returns as ``AdditiveAttention.forward``; projected_keys is (batch, src_len,
        query_dim) from ``project_keys(keys)``."""
        inputs = _prepare(query, keys, values, mask, query_dim=self.query_dim, key_dim=self.key_dim)
        if projected_keys is None:
            projected_keys = self.key_proj(inputs.keys)  # (batch, src_len, query_dim)
        else:
            projected_keys = _reuse_projected(projected_keys, keys, self.query_dim)
        context, weights = _dot_product_attend(
            inputs.query, projected_keys, inputs.values, inputs.mask
        )
        return _finish(context, weights, inputs)


def _check_impl(impl: str) -> str:
    if impl not in ("auto", "math", "sdpa"):
        raise ValueError(f"impl must be one of 'auto', 'math', 'sdpa', got {impl!r}")
    return impl


def _use_fast_path(owner: str, impl: str, need_weights: bool) -> bool:
    """Pick SDPA or the math path; log at debug level why the fast path was skipped."""
    if impl == "sdpa":
        if need_weights:
            raise ValueError(
                f"{owner}(impl='sdpa') cannot return weights; pass need_weights=False "
                f"or use impl='auto'/'math'"
            )
        return True
    if impl == "math":
        logger.debug("%s: SDPA fast path skipped: impl='math'", owner)
        return False
    if need_weights:
        logger.debug("%s: SDPA fast path skipped: need_weights=True", owner)
        return False
    return True


# SDPA's backends on CUDA, cuDNN's left out: for bf16 on an H100, PyTorch 2.11 may pick cuDNN's
# attention, which builds a plan for every new shape (hundreds of milliseconds each, reported by
# others), and translation batches change (rows, src_len, tgt_len) nearly every step. Flash
# attention (no mask) and memory-efficient attention need no plan. docs/gpu.md has the figures.
CUDA_SDPA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def _sdpa(query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, dropout_p: float) -> Tensor:
    """torch's SDPA; on CUDA limited to CUDA_SDPA_BACKENDS."""
    with sdpa_kernel(CUDA_SDPA_BACKENDS) if query.is_cuda else nullcontext():
        return F.scaled_dot_product_attention(query, keys, values, attn_mask=mask, dropout_p=dropout_p)


def scaled_dot_product(
    query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, *, fast: bool,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor | None]:
    """softmax(Q K^T / sqrt(d)) V, Vaswani et al. 2017 eq. 1, through SDPA or the math path.

    Args:
        query: (..., tgt_len, head_dim); keys (..., src_len, head_dim); values (..., src_len, v_dim)
        mask: bool broadcastable to (..., tgt_len, src_len), True = may attend.

    Returns:
        context (..., tgt_len, v_dim) and weights (..., tgt_len, src_len), or None when fast.
    """
    if fast:
        if mask is None:
            return _sdpa(query, keys, values, None, dropout_p), None
        # Rows with nothing to attend get an all-True row for SDPA (no NaN), then zero output.
        empty = mask.any(dim=-1, keepdim=True).logical_not()  # (..., tgt_len, 1)
        context = _sdpa(query, keys, values, mask | empty, dropout_p)  # (..., tgt_len, v_dim)
        return context.masked_fill(empty, 0.0), None
    scale = 1.0 / math.sqrt(query.shape[-1])
    energy = torch.matmul(query, keys.transpose(-2, -1)) * scale  # (..., tgt_len, src_len)
    weights = _masked_softmax(energy, mask)
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return torch.matmul(dropped, values), weights  # (..., tgt_len, v_dim)


class MultiHeadAttention(nn.Module):
    """Multi-head attention, Vaswani et al. 2017 sec. 3.2.2: concat(head_1..head_h) W_O.

    Args:
        d_model: query size and output size; heads must divide it.
        heads: number of heads.
        dropout: dropout on the attention weights (training only).
        kdim, vdim: key and value sizes (default d_model).
        bias: biases in the four projections.
        impl: "math", "sdpa" or "auto" (SDPA when ``need_weights=False``).

    Incremental decoding: ``k, v = mha.project_kv(keys, values)`` gives (batch, heads, src_len,
    head_dim); cache them (append new steps on dim 2) and call
    ``mha(query_step, mask=..., kv=(k, v))`` with query (batch, 1, d_model). For self-attention,
    ``q, k, v = mha.project_qkv(x)`` projects all three in one matmul; pass
    ``projected_query=q`` with the cached ``kv``.
    """

    def __init__(
        self, d_model: int, heads: int, dropout: float = 0.0, *, kdim: int | None = None,
        vdim: int | None = None, bias: bool = True, impl: str = "auto",
    ):
        super().__init__()
        if heads <= 0 or d_model % heads:
            raise ValueError(f"heads={heads} must divide d_model={d_model}")
        self.d_model, self.heads, self.head_dim = d_model, heads, d_model // heads
        self.kdim, self.vdim = kdim or d_model, vdim or d_model
        self.dropout, self.impl = dropout, _check_impl(impl)
        self.query_proj = nn.Linear(d_model, d_model, bias=bias)
        self.key_proj = nn.Linear(self.kdim, d_model, bias=bias)
        self.value_proj = nn.Linear(self.vdim, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _split_heads(self, x: Tensor) -> Tensor:
        x = x.unflatten(-1, (self.heads, self.head_dim))  # ([batch,] len, heads, head_dim)
        return x.transpose(-3, -2)  # ([batch,] heads, len, head_dim)

    def project_kv(self, keys: Tensor, values: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Project keys and values once (encoder states for cross-attention, or a step cache).

        Args:
            keys: (batch, src_len, kdim) or unbatched (src_len, kdim).
            values: (batch, src_len, vdim); defaults to keys.

        Returns:
            k, v: each (batch, heads, src_len, head_dim) (unbatched: no batch dim).
        """
        values = keys if values is None else values
        if keys.dim() not in (2, 3) or keys.shape[-1] != self.kdim \
                or values.shape[:-1] != keys.shape[:-1] or values.shape[-1] != self.vdim:
            raise ValueError(
                f"keys must be (batch, src_len, {self.kdim}) and values (batch, src_len, "
                f"{self.vdim}); got keys {tuple(keys.shape)}, values {tuple(values.shape)}"
            )
        return self._split_heads(self.key_proj(keys)), self._split_heads(self.value_proj(values))

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention's q, k, v of x (batch, len, d_model), each (batch, heads, len, head_dim).

        Without autograd the three projections run as one matmul over their weights stacked
        (built once and rebuilt when a weight changes or moves: the parameters, their names and
        the checkpoints stay those of the three Linear layers); with autograd, as three.
        """
        fused = self._fused_qkv()
        if fused is None:
            k, v = self.project_kv(x)
            return self._split_heads(self.query_proj(x)), k, v
        q, k, v = F.linear(x, *fused).chunk(3, dim=-1)  # each (batch, len, d_model)
        return self._split_heads(q), self._split_heads(k), self._split_heads(v)

    def _fused_qkv(self) -> tuple[Tensor, Tensor | None] | None:
        """The stacked (3 * d_model, d_model) weight and (3 * d_model,) bias, cached with the
        parameters they came from and those parameters' version counters; None where fusing does
        not apply (autograd on, key / value sizes other than d_model, inference-mode parameters)."""
        params = [t for proj in (self.query_proj, self.key_proj, self.value_proj)
                  for t in (proj.weight, proj.bias) if t is not None]
        if torch.is_grad_enabled() or self.kdim != self.d_model or self.vdim != self.d_model \
                or any(t.is_inference() for t in params):
            return None
        cached = self.__dict__.get("_fused_cache")  # (sources, versions, weight, bias)
        if cached is None or len(cached[0]) != len(params) or any(
                old.data_ptr() != new.data_ptr() or version != new._version
                for old, version, new in zip(cached[0], cached[1], params)):
            weight = torch.cat([p.weight for p in (self.query_proj, self.key_proj, self.value_proj)])
            bias = None if self.query_proj.bias is None else torch.cat(
                [p.bias for p in (self.query_proj, self.key_proj, self.value_proj)])
            # holding the sources keeps their memory from being reused at the same address
            cached = ([t.detach() for t in params], [t._version for t in params], weight, bias)
            self.__dict__["_fused_cache"] = cached
        return cached[2], cached[3]

    def forward(
        self,
        query: Tensor,
        keys: Tensor | None = None,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        *,
        kv: tuple[Tensor, Tensor] | None = None,
        projected_query: Tensor | None = None,
        need_weights: bool = True,
        average_heads: bool = True,
    ) -> AttentionOutput:
        """Attend with ``heads`` heads.

        Args:
            query: (batch, d_model) one step, or (batch, tgt_len, d_model).
            keys: (batch, src_len, kdim); leave None when ``kv`` is given.
            values: (batch, src_len, vdim); defaults to keys.
            mask: bool, True = may attend; (batch, src_len) or (batch, tgt_len, src_len).
            kv: already projected (k, v), each (batch, heads, src_len, head_dim), from
                ``project_kv``.
            projected_query: q (batch, heads, tgt_len, head_dim) from ``project_qkv`` (the
                query then only gives the shapes).
            need_weights: False allows the SDPA fast path and returns weights=None.
            average_heads: weights averaged over heads (batch, tgt_len, src_len), else
                (batch, heads, tgt_len, src_len).

        Returns:
            AttentionOutput: context (batch, [tgt_len,] d_model), weights as above (None when
            ``need_weights=False``). Weights are before dropout.
        """
        if (keys is None) == (kv is None):
            raise ValueError("pass exactly one of keys or kv=(k, v) from project_kv")
        kv_layout = None
        if kv is not None:
            k, v = kv
            if k.dim() not in (3, 4) or v.shape[:-1] != k.shape[:-1] or k.shape[-3] != self.heads \
                    or k.shape[-1] != self.head_dim or k.dtype != query.dtype:
                raise ValueError(
                    f"kv must be (batch, {self.heads}, src_len, {self.head_dim}) each, dtype "
                    f"{query.dtype}; got k {tuple(k.shape)} {k.dtype}, v {tuple(v.shape)}"
                )
            kv_layout = (k.dim() == 4, k.shape[-2])
        inputs = _prepare(
            query, keys, values, mask, query_dim=self.d_model, key_dim=self.kdim,
            value_dim=self.vdim, kv_layout=kv_layout,
        )
        if kv is None:
            k, v = self.project_kv(inputs.keys, inputs.values)  # (batch, heads, src_len, head_dim)
        elif k.dim() == 3:
            k, v = k.unsqueeze(0), v.unsqueeze(0)  # (1, heads, src_len, head_dim)
        batch, tgt_len, _ = inputs.query.shape
        if k.shape[0] != batch:
            raise ValueError(
                f"query and kv must have the same batch size; got query {tuple(query.shape)}, "
                f"k {tuple(k.shape)}"
            )
        q = self._split_heads(self.query_proj(inputs.query)) if projected_query is None else projected_query
        # q: (batch, heads, tgt_len, head_dim)
        mask = None if inputs.mask is None else inputs.mask.unsqueeze(1)
        # mask: (batch, 1, tgt_len, src_len), broadcast over heads
        fast = _use_fast_path(type(self).__name__, self.impl, need_weights)
        dropout_p = self.dropout if self.training else 0.0
        context, weights = scaled_dot_product(q, k, v, mask, fast=fast, dropout_p=dropout_p)
        context = context.transpose(1, 2).reshape(batch, tgt_len, self.d_model)
        # context: (batch, tgt_len, d_model)
        context = self.out_proj(context)
        if inputs.mask is not None:  # rows with nothing to attend: zero output, not the bias
            empty = inputs.mask.any(dim=-1, keepdim=True).logical_not()  # (batch, tgt_len, 1)
            context = context.masked_fill(empty, 0.0)
        if weights is not None and average_heads:
            weights = weights.mean(dim=1)  # (batch, tgt_len, src_len)
        return _finish(context, weights, inputs)
