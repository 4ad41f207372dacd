"""Tests for attnmt.attention: every variant against a float64 loop reference written here."""

from __future__ import annotations

import logging
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnmt.attention import (
    AdditiveAttention,
    AttentionOutput,
    DotAttention,
    GeneralAttention,
    MultiHeadAttention,
    scaled_dot_product,
    causal_mask,
    lengths_to_mask,
)

DTYPE = torch.float64
VARIANTS = ["additive", "dot", "general", "scaled_math", "scaled_sdpa", "mha_math", "mha_sdpa"]
FEW = settings(max_examples=8, deadline=None)


class BareScaled(nn.Module):
    """attention.scaled_dot_product, the math inside MultiHeadAttention, behind the common call."""

    def __init__(self, impl: str):
        super().__init__()
        self.fast = impl == "sdpa"

    def forward(self, query, keys, values=None, mask=None, *, need_weights=True):
        values = keys if values is None else values
        if keys.dim() == 2:  # unbatched: a batch of one
            out = self(query[None], keys[None], values[None], None if mask is None else mask[None])
            return AttentionOutput(out.context[0], None if out.weights is None else out.weights[0])
        step = query.dim() == 2
        rows = query.unsqueeze(1) if step else query  # (batch, tgt_len, hidden)
        if mask is not None and mask.dim() == 2:
            mask = mask.unsqueeze(1)  # (batch, 1, src_len): the same padding for every query row
        context, weights = scaled_dot_product(rows, keys, values, mask, fast=self.fast)
        if step:
            context, weights = context.squeeze(1), None if weights is None else weights.squeeze(1)
        return AttentionOutput(context, weights)


def make(name: str, query_dim: int, key_dim: int, value_dim: int) -> nn.Module:
    """Build a variant in float64; dot/scaled need query_dim == key_dim."""
    torch.manual_seed(0)
    impl = name.rpartition("_")[2]  # "math" or "sdpa" for the scaled variants
    if name == "additive":
        module = AdditiveAttention(query_dim, key_dim, attn_dim=5)
    elif name == "dot":
        module = DotAttention(query_dim, key_dim)
    elif name == "general":
        module = GeneralAttention(query_dim, key_dim)
    elif name.startswith("scaled"):
        module = BareScaled(impl)
    else:
        module = MultiHeadAttention(query_dim, 2, kdim=key_dim, vdim=value_dim, impl=impl)
    return module.to(DTYPE).eval()


def dims(name: str) -> tuple[int, int, int]:
    """(query_dim, key_dim, value_dim) that the variant accepts."""
    if name in ("dot", "scaled_math", "scaled_sdpa"):
        return 4, 4, 3
    return 6, 4, 3


def call(module: nn.Module, name: str, *args, **kwargs) -> AttentionOutput:
    if name.endswith("sdpa"):
        kwargs["need_weights"] = False
    return module(*args, **kwargs)


# ----- independent reference (python floats, loops) -----


def ref_softmax(scores: list[float], allowed: list[bool]) -> list[float]:
    kept = [s for s, ok in enumerate(allowed) if ok]
    if not kept:
        return [0.0] * len(scores)
    top = max(scores[s] for s in kept)
    exps = {s: math.exp(scores[s] - top) for s in kept}
    total = sum(exps.values())
    return [exps[s] / total if s in exps else 0.0 for s in range(len(scores))]


def linear(layer: nn.Linear, x: torch.Tensor) -> list[float]:
    weight = layer.weight.detach().tolist()
    bias = [0.0] * len(weight) if layer.bias is None else layer.bias.detach().tolist()
    xs = x.tolist()
    return [sum(w * xi for w, xi in zip(row, xs)) + b for row, b in zip(weight, bias)]


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


def ref_score_fn(name: str, module: nn.Module):
    """Return score(q_vec, k_vec) -> float for the single-head variants."""
    if name == "additive":
        v = module.energy.weight.detach()[0].tolist()
        def additive(q, k):
            pairs = zip(linear(module.query_proj, q), linear(module.key_proj, k))
            return dot(v, [math.tanh(a + b) for a, b in pairs])

        return additive
    if name == "dot":
        return lambda q, k: dot(q.tolist(), k.tolist())
    if name == "general":
        return lambda q, k: dot(q.tolist(), linear(module.key_proj, k))
    return lambda q, k: dot(q.tolist(), k.tolist()) / math.sqrt(len(q))


def ref_attention(name, module, query, keys, values, mask):
    """query (B, T, Dq), keys (B, S, Dk), values (B, S, Dv), mask (B, T, S) -> context, weights."""
    B, T, _ = query.shape
    S = keys.shape[1]
    if name.startswith("mha"):
        return ref_multihead(module, query, keys, values, mask)
    score = ref_score_fn(name, module)
    context = torch.zeros(B, T, values.shape[-1], dtype=DTYPE)
    weights = torch.zeros(B, T, S, dtype=DTYPE)
    for b in range(B):
        for t in range(T):
            scores = [score(query[b, t], keys[b, s]) for s in range(S)]
            row = ref_softmax(scores, mask[b, t].tolist())
            weights[b, t] = torch.tensor(row, dtype=DTYPE)
            for s in range(S):
                context[b, t] += row[s] * values[b, s]
    return context, weights


def ref_multihead(module, query, keys, values, mask):
    B, T, _ = query.shape
    S, H, hd = keys.shape[1], module.heads, module.head_dim
    context = torch.zeros(B, T, module.d_model, dtype=DTYPE)
    weights = torch.zeros(B, H, T, S, dtype=DTYPE)
    for b in range(B):
        ks = [linear(module.key_proj, keys[b, s]) for s in range(S)]
        vs = [linear(module.value_proj, values[b, s]) for s in range(S)]
        for t in range(T):
            q = linear(module.query_proj, query[b, t])
            concat = []
            for h in range(H):
                part = slice(h * hd, (h + 1) * hd)
                scores = [dot(q[part], ks[s][part]) / math.sqrt(hd) for s in range(S)]
                row = ref_softmax(scores, mask[b, t].tolist())
                weights[b, h, t] = torch.tensor(row, dtype=DTYPE)
                concat += [sum(row[s] * vs[s][part][i] for s in range(S)) for i in range(hd)]
            if any(mask[b, t].tolist()):  # a row with nothing to attend outputs zeros, not the bias
                out = linear(module.out_proj, torch.tensor(concat, dtype=DTYPE))
                context[b, t] = torch.tensor(out, dtype=DTYPE)
    return context, weights


# ----- random inputs -----


@st.composite
def problems(draw):
    batch = draw(st.integers(1, 3))
    src_len = draw(st.integers(1, 5))
    tgt_len = draw(st.integers(1, 4))
    one_step = draw(st.booleans())
    kinds = ["none", "padding"] if one_step else ["none", "padding", "causal", "random"]
    kind = draw(st.sampled_from(kinds))
    lengths = draw(st.lists(st.integers(0, src_len), min_size=batch, max_size=batch))
    seed = draw(st.integers(0, 2**16))
    return batch, src_len, (1 if one_step else tgt_len), one_step, kind, lengths, seed


def make_mask(kind, batch, tgt_len, src_len, lengths, gen):
    """The mask to pass, and its (batch, tgt_len, src_len) expansion for the reference."""
    padding = torch.tensor([[s < n for s in range(src_len)] for n in lengths])  # (batch, src_len)
    if kind == "none":
        return None, torch.ones(batch, tgt_len, src_len, dtype=torch.bool)
    if kind == "padding":
        return padding, padding[:, None, :].expand(batch, tgt_len, src_len)
    if kind == "causal":
        tri = torch.tensor([[s <= t for s in range(src_len)] for t in range(tgt_len)])
        full = padding[:, None, :] & tri
        return full, full
    full = torch.rand(batch, tgt_len, src_len, generator=gen) < 0.6
    return full, full


@pytest.mark.parametrize("name", VARIANTS)
@FEW
@given(problem=problems())
def test_matches_float64_reference(name, problem):
    batch, src_len, tgt_len, one_step, kind, lengths, seed = problem
    qd, kd, vd = dims(name)
    gen = torch.Generator().manual_seed(seed)
    module = make(name, qd, kd, vd)
    query = torch.randn(batch, tgt_len, qd, generator=gen, dtype=DTYPE)
    keys = torch.randn(batch, src_len, kd, generator=gen, dtype=DTYPE)
    values = torch.randn(batch, src_len, vd, generator=gen, dtype=DTYPE)
    mask, full_mask = make_mask(kind, batch, tgt_len, src_len, lengths, gen)
    if name.startswith("scaled") or name == "dot":
        values = keys[..., :vd] * 2  # any value size works; keep it distinct from keys
    want_context, want_weights = ref_attention(name, module, query, keys, values, full_mask)

    out = call(module, name, query[:, 0] if one_step else query, keys, values, mask)
    context = out.context.unsqueeze(1) if one_step else out.context
    torch.testing.assert_close(context, want_context, rtol=1e-9, atol=1e-9)
    if name.endswith("sdpa"):
        assert out.weights is None
        return
    if name.startswith("mha"):
        want_weights = want_weights.mean(dim=1)
    weights = out.weights.unsqueeze(1) if one_step else out.weights
    torch.testing.assert_close(weights, want_weights, rtol=1e-9, atol=1e-9)
    # Exactly 0 where masked, rows sum to 1 where anything is allowed, and 0 otherwise.
    assert torch.all(weights[~full_mask] == 0)
    has_any = full_mask.any(-1)
    torch.testing.assert_close(weights.sum(-1), has_any.to(DTYPE))
    assert torch.all(context[~has_any] == 0)


@pytest.mark.parametrize("name", VARIANTS)
def test_batch_invariance_and_extra_padding(name):
    qd, kd, vd = dims(name)
    gen = torch.Generator().manual_seed(1)
    module = make(name, qd, kd, vd)
    lengths = [5, 2, 4, 0]
    batch, src_len, tgt_len = len(lengths), 5, 3
    query = torch.randn(batch, tgt_len, qd, generator=gen, dtype=DTYPE)
    keys = torch.randn(batch, src_len, kd, generator=gen, dtype=DTYPE)
    values = torch.randn(batch, src_len, vd, generator=gen, dtype=DTYPE)
    if name in ("dot",) or name.startswith("scaled"):
        values = keys[..., :vd].clone()
    mask = lengths_to_mask(torch.tensor(lengths), src_len)
    out = call(module, name, query, keys, values, mask)
    for b, n in enumerate(lengths):
        if n == 0:
            assert torch.all(out.context[b] == 0)
            continue
        alone = call(module, name, query[b : b + 1], keys[b : b + 1, :n], values[b : b + 1, :n])
        torch.testing.assert_close(alone.context[0], out.context[b], rtol=1e-12, atol=1e-12)
        if alone.weights is not None:
            torch.testing.assert_close(
                alone.weights[0], out.weights[b, :, :n], rtol=1e-12, atol=1e-12
            )
    # Three more positions of garbage padding change nothing.
    junk_keys = 1e3 * torch.randn(batch, 3, kd, generator=gen, dtype=DTYPE)
    junk_values = 1e3 * torch.randn(batch, 3, vd, generator=gen, dtype=DTYPE)
    extra_keys, extra_values = torch.cat([keys, junk_keys], 1), torch.cat([values, junk_values], 1)
    extra_mask = lengths_to_mask(torch.tensor(lengths), 8)
    padded = call(module, name, query, extra_keys, extra_values, extra_mask)
    torch.testing.assert_close(padded.context, out.context, rtol=1e-12, atol=1e-12)
    if out.weights is not None:
        torch.testing.assert_close(padded.weights[..., :src_len], out.weights, rtol=0, atol=0)
        assert torch.all(padded.weights[..., src_len:] == 0)


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("one_step", [True, False])
def test_unbatched_equals_batch_of_one(name, one_step):
    qd, kd, vd = dims(name)
    module = make(name, qd, kd, vd)
    query = torch.randn(1, 3, qd, dtype=DTYPE)
    query = query[:, 0] if one_step else query
    keys, values = torch.randn(1, 4, kd, dtype=DTYPE), torch.randn(1, 4, vd, dtype=DTYPE)
    mask = torch.tensor([[True, False, True, True]])
    batched = call(module, name, query, keys, values, mask)
    single = call(module, name, query[0], keys[0], values[0], mask[0])
    assert single.context.shape == batched.context.shape[1:]
    torch.testing.assert_close(single.context, batched.context[0])
    if batched.weights is not None:
        torch.testing.assert_close(single.weights, batched.weights[0])


@pytest.mark.parametrize("name", VARIANTS)
def test_gradcheck_with_empty_row(name):
    qd, kd, vd = dims(name)
    module = make(name, qd, kd, vd)
    gen = torch.Generator().manual_seed(2)
    query = torch.randn(2, 2, qd, generator=gen, dtype=DTYPE, requires_grad=True)
    keys = torch.randn(2, 3, kd, generator=gen, dtype=DTYPE, requires_grad=True)
    values = torch.randn(2, 3, vd, generator=gen, dtype=DTYPE, requires_grad=True)
    mask = torch.tensor([
        [[True, True, False], [False, False, False]],  # second query row: nothing to attend
        [[True, False, True], [True, True, True]],
    ])

    def context(q, k, v):
        return call(module, name, q, k, v, mask).context

    assert torch.autograd.gradcheck(context, (query, keys, values))


@pytest.mark.parametrize("name", VARIANTS)
def test_fully_masked_rows_give_zeros_and_finite_grads(name):
    qd, kd, vd = dims(name)
    module = make(name, qd, kd, vd).float()
    query = torch.randn(2, 3, qd, requires_grad=True)
    keys = torch.randn(2, 4, kd, requires_grad=True)
    mask = torch.zeros(2, 4, dtype=torch.bool)
    mask[0, :2] = True
    values = torch.randn(2, 4, vd, requires_grad=True)
    out = call(module, name, query, keys, values, mask)
    assert torch.all(out.context[1] == 0) and not out.context.isnan().any()
    if out.weights is not None:
        assert torch.all(out.weights[1] == 0)
    out.context.sum().backward()
    grads = [query.grad, keys.grad, values.grad] + [p.grad for p in module.parameters()]
    assert all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("kind", ["none", "padding", "causal", "random"])
@pytest.mark.parametrize("step", [True, False])
def test_math_path_equals_sdpa_path(kind, step):
    gen = torch.Generator().manual_seed(3)
    batch, tgt_len, src_len = 3, (1 if step else 4), 4
    mask, _ = make_mask(kind, batch, tgt_len, src_len, [4, 0, 2], gen)
    query = torch.randn(batch, tgt_len, 8, generator=gen)
    keys = torch.randn(batch, src_len, 8, generator=gen)
    query = query[:, 0] if step else query
    mha = MultiHeadAttention(8, 2).eval()
    math_out = mha(query, keys, mask=mask)
    fast_out = mha(query, keys, mask=mask, need_weights=False)
    assert fast_out.weights is None
    torch.testing.assert_close(fast_out.context, math_out.context)
    sdp = BareScaled("sdpa")
    torch.testing.assert_close(sdp(query, keys, mask=mask).context, BareScaled("math")(query, keys, mask=mask).context)


def test_auto_logs_why_the_fast_path_was_skipped(caplog):
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with caplog.at_level(logging.DEBUG, logger="attnmt.attention"):
        mha(x, x)
    assert "SDPA fast path skipped: need_weights=True" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="attnmt.attention"):
        mha(x, x, need_weights=False)
        MultiHeadAttention(8, 2, impl="math")(x, x, need_weights=False)
    assert caplog.text.count("skipped") == 1 and "impl='math'" in caplog.text


def test_additive_split_projection_equals_concat_linear():
    """v^T tanh(W [q; k] + b), one Linear over the concatenation re-run per step (tutorial form)."""
    torch.manual_seed(4)
    attn = AdditiveAttention(query_dim=6, key_dim=4, attn_dim=5).double()
    concat = nn.Linear(6 + 4, 5).double()
    with torch.no_grad():
        concat.weight.copy_(torch.cat([attn.query_proj.weight, attn.key_proj.weight], dim=1))
        concat.bias.copy_(attn.key_proj.bias)
    keys = torch.randn(3, 7, 4, dtype=DTYPE)
    mask = lengths_to_mask(torch.tensor([7, 4, 1]))
    projected = attn.project_keys(keys)
    for _ in range(3):  # decoder steps
        hidden = torch.randn(3, 6, dtype=DTYPE)
        both = torch.cat([hidden[:, None, :].expand(-1, 7, -1), keys], dim=-1)
        energy = attn.energy(torch.tanh(concat(both))).squeeze(-1)
        want = energy.masked_fill(~mask, float("-inf")).softmax(-1)
        out = attn(hidden, keys, mask=mask, projected_keys=projected)
        torch.testing.assert_close(out.weights, want)
        torch.testing.assert_close(out.context, torch.bmm(want[:, None], keys)[:, 0])


def test_general_projected_keys_reused():
    attn = GeneralAttention(6, 4)
    keys, query = torch.randn(2, 5, 4), torch.randn(2, 6)
    out = attn(query, keys, projected_keys=attn.project_keys(keys))
    torch.testing.assert_close(out.context, attn(query, keys).context)


def test_mha_matches_torch_multihead_attention():
    torch.manual_seed(5)
    ours = MultiHeadAttention(8, 2).eval()
    theirs = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    with torch.no_grad():
        projs = [ours.query_proj, ours.key_proj, ours.value_proj]
        theirs.in_proj_weight.copy_(torch.cat([p.weight for p in projs]))
        theirs.in_proj_bias.copy_(torch.cat([p.bias for p in projs]))
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)
    x, mem = torch.randn(3, 4, 8), torch.randn(3, 6, 8)
    mask = lengths_to_mask(torch.tensor([6, 3, 1]))
    out = ours(x, mem, mask=mask)
    want, want_weights = theirs(x, mem, mem, key_padding_mask=mask.logical_not())
    torch.testing.assert_close(out.context, want)
    torch.testing.assert_close(out.weights, want_weights)
    per_head = ours(x, mem, mask=mask, average_heads=False).weights
    assert per_head.shape == (3, 2, 4, 6)
    torch.testing.assert_close(per_head.mean(1), out.weights)


@pytest.mark.parametrize("impl", ["math", "sdpa"])
def test_mha_incremental_decoding_equals_full_pass(impl):
    torch.manual_seed(6)
    mha = MultiHeadAttention(8, 2, impl=impl).eval()
    x = torch.randn(2, 5, 8)
    lengths = torch.tensor([5, 3])
    mask = lengths_to_mask(lengths)[:, None, :] & causal_mask(5)  # (batch, tgt_len, src_len)
    full = mha(x, x, mask=mask, need_weights=False).context
    k_cache = v_cache = None
    for t in range(5):
        k, v = mha.project_kv(x[:, t : t + 1])  # (batch, heads, 1, head_dim)
        k_cache = k if k_cache is None else torch.cat([k_cache, k], dim=2)
        v_cache = v if v_cache is None else torch.cat([v_cache, v], dim=2)
        step = mha(x[:, t], mask=mask[:, t, : t + 1], kv=(k_cache, v_cache), need_weights=False)
        assert step.context.shape == (2, 8)
        torch.testing.assert_close(step.context, full[:, t])


def test_causal_mask_broadcasts_over_batch():
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(3, 4, 8)
    tri = causal_mask(4, x.device)
    assert tri.dtype == torch.bool and tri.shape == (4, 4)
    assert tri[1].tolist() == [True, True, False, False]
    broadcast, expanded = mha(x, x, mask=tri[None]), mha(x, x, mask=tri.expand(3, 4, 4))
    torch.testing.assert_close(broadcast.context, expanded.context)


def test_lengths_to_mask():
    mask = lengths_to_mask(torch.tensor([3, 0, 1]), max_len=4)
    assert mask.dtype == torch.bool
    assert mask.tolist() == [[True, True, True, False], [False] * 4, [True, False, False, False]]
    assert lengths_to_mask(torch.tensor([2, 1])).shape == (2, 2)
    with pytest.raises(ValueError, match="shorter than the longest length 3"):
        lengths_to_mask(torch.tensor([3]), max_len=2)
    with pytest.raises(ValueError, match=r"got shape \(2, 1\)"):
        lengths_to_mask(torch.tensor([[3], [1]]))
    with pytest.raises(ValueError, match=">= 0"):
        lengths_to_mask(torch.tensor([2, -1]))


@pytest.mark.parametrize(
    "make_call, match",
    [
        (
            lambda a, q, k: a(q, k, mask=torch.ones(3, 7)),
            r"mask must be bool.*not torch.float32; got query \(3, 6\)",
        ),
        (lambda a, q, k: a(q, k[:2]), r"same batch size; got query \(3, 6\), keys \(2, 7, 4\)"),
        (lambda a, q, k: a(q[:, :5], k), r"query feature size must be 6; got query \(3, 5\)"),
        (lambda a, q, k: a(q, k[..., :3]), r"keys feature size must be 4; got .*keys \(3, 7, 3\)"),
        (
            lambda a, q, k: a(q, k, mask=torch.ones(3, 6, dtype=torch.bool)),
            r"src_len=7; .*mask \(3, 6\)",
        ),
        (lambda a, q, k: a(q, k, k[:, :5]), r"values must match keys.*values \(3, 5, 4\)"),
        (lambda a, q, k: a(q.double(), k), r"share a dtype"),
        (lambda a, q, k: a(q, k[0, 0]), r"keys must be .*keys \(4,\)"),
        (
            lambda a, q, k: a(q, k, projected_keys=torch.zeros(3, 7, 4)),
            r"projected_keys must be \(3, 7, 5\)",
        ),
    ],
)
def test_misuse_raises_value_error_naming_shapes(make_call, match):
    attn = AdditiveAttention(6, 4, 5)
    with pytest.raises(ValueError, match=match):
        make_call(attn, torch.randn(3, 6), torch.randn(3, 7, 4))


def test_mha_misuse_raises_value_error():
    with pytest.raises(ValueError, match="heads=3 must divide d_model=8"):
        MultiHeadAttention(8, 3)
    with pytest.raises(ValueError, match="impl must be one of"):
        MultiHeadAttention(8, 2, impl="flash")
    mha = MultiHeadAttention(8, 2, impl="sdpa")
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match="cannot return weights"):
        mha(x, x)
    with pytest.raises(ValueError, match="exactly one of keys or kv"):
        mha(x, x, kv=mha.project_kv(x), need_weights=False)
    with pytest.raises(ValueError, match=r"kv must be \(batch, 2, src_len, 4\).*k \(2, 3, 8\)"):
        mha(x, kv=(x, x), need_weights=False)
    with pytest.raises(ValueError, match=r"batch size; got query \(1, 3, 8\), k \(2, 2, 3, 4\)"):
        mha(x[:1], kv=mha.project_kv(x), need_weights=False)
    with pytest.raises(ValueError, match=r"keys must be \(batch, src_len, 8\).*keys \(2, 3, 5\)"):
        mha.project_kv(torch.randn(2, 3, 5))
    with pytest.raises(ValueError, match="query_dim == key_dim"):
        DotAttention(4, 5)


def test_dropout_only_in_training():
    mha = MultiHeadAttention(8, 2, dropout=0.5)
    x = torch.randn(2, 5, 8)
    torch.manual_seed(0)
    train = mha(x, x).context
    mha.eval()
    assert not torch.allclose(train, mha(x, x).context)
    torch.testing.assert_close(mha(x, x).context, mha(x, x, need_weights=False).context)


def test_mha_project_qkv_is_the_three_projections_and_follows_their_weights():
    """Outside autograd project_qkv runs one matmul over the stacked weights; the result is
    the three Linear layers' (written out here), also after a weight changes in place or the
    module changes dtype; with autograd on it does not fuse."""
    torch.manual_seed(7)
    mha = MultiHeadAttention(8, 2).to(DTYPE)
    x = torch.randn(3, 4, 8, dtype=DTYPE)

    def expected():  # (batch, heads, len, head_dim) each
        return [(x @ p.weight.T + p.bias).view(3, 4, 2, 4).transpose(1, 2)
                for p in (mha.query_proj, mha.key_proj, mha.value_proj)]

    with torch.no_grad():
        assert mha._fused_qkv() is not None
        for got, want in zip(mha.project_qkv(x), expected()):
            torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
        mha.key_proj.weight.mul_(2.0)  # in place: the stacked copy must follow
        for got, want in zip(mha.project_qkv(x), expected()):
            torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
        mha.float()
        x = x.float()
        assert all(t.dtype == torch.float32 for t in mha.project_qkv(x))
        for got, want in zip(mha.project_qkv(x), expected()):
            torch.testing.assert_close(got, want)
        q, k, v = mha.project_qkv(x)
        fused_out = mha(x, kv=(k, v), projected_query=q).context
    assert mha._fused_qkv() is None  # autograd on: the three Linear layers
    torch.testing.assert_close(fused_out, mha(x, x).context)
