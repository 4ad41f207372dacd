"""The Transformer's initialisation: Glorot on every projection and the output layer, token
embeddings N(0, d_model^-1/2) (times sqrt(d_model) in the forward pass: unit scale), zero
biases and pad rows, LayerNorm at identity (docs/results.md, "Quality per update").

The bound of Glorot's uniform distribution is computed here from its formula (Glorot & Bengio
2010, eq. 16: U(-a, a), a = sqrt(6 / (fan_in + fan_out)), variance a^2 / 3), not taken from torch.
"""

import math

import pytest
import torch
from torch import nn

from attnmt.models.transformer import TransformerSeq2Seq

SRC_VOCAB, TGT_VOCAB, D_MODEL, FF = 300, 200, 32, 64


def glorot_bound(rows: int, cols: int) -> float:
    return math.sqrt(6.0 / (rows + cols))


def build(**kw) -> TransformerSeq2Seq:
    torch.manual_seed(0)
    return TransformerSeq2Seq(SRC_VOCAB, TGT_VOCAB, d_model=D_MODEL, heads=4, ff_dim=FF, enc_layers=2,
                              dec_layers=2, **kw)


def linears(model: nn.Module) -> list[tuple[str, nn.Linear]]:
    return [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear)]


def real_rows(embedding: nn.Embedding) -> torch.Tensor:
    keep = torch.ones(embedding.weight.shape[0], dtype=torch.bool)
    keep[embedding.padding_idx] = False
    return embedding.weight.detach()[keep]


@pytest.mark.parametrize("pre_norm", [True, False])
def test_every_projection_and_the_output_layer_follow_glorot(pre_norm):
    model = build(pre_norm=pre_norm)
    seen = set()
    for name, module in linears(model):
        weight = module.weight.detach()
        rows, cols = weight.shape  # (out, in)
        bound = glorot_bound(rows, cols)
        assert weight.abs().max() <= bound + 1e-7, name
        # tolerances: 5 standard errors of each statistic for n uniform draws
        n, std = weight.numel(), weight.float().std().item()
        assert std == pytest.approx(bound / math.sqrt(3.0), rel=5 * math.sqrt(0.2 / n)), name
        assert abs(weight.float().mean().item()) < 5 * bound / math.sqrt(3.0 * n), name
        # uniform, not normal: half the mass lies within half the bound
        inner = (weight.abs() < bound / 2).float().mean().item()
        assert inner == pytest.approx(0.5, abs=5 * math.sqrt(0.25 / n)), name
        seen.add(name.split(".")[-1])
    assert {"generator", "query_proj", "key_proj", "value_proj", "out_proj", "in_proj"} <= seen


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_embeddings_are_normal_with_std_d_model_to_the_minus_half(positions):
    """N(0, d^-1/2): after the sqrt(d_model) scale the token vectors have unit variance per
    dimension, whatever the vocabulary size (Glorot would shrink them as the vocabulary grows)."""
    model = build(positions=positions)
    embeddings = [model.src_embed, model.tgt_embed] + ([model.pos_embed] if positions == "learned" else [])
    for embedding in embeddings:
        weight = real_rows(embedding) if embedding.padding_idx is not None else embedding.weight.detach()
        n, std = weight.numel(), weight.std().item()
        assert std == pytest.approx(D_MODEL ** -0.5, rel=5 * math.sqrt(0.5 / n))
        assert abs(weight.mean().item()) < 5 * D_MODEL ** -0.5 / math.sqrt(n)
        # normal, not uniform: about 68.3% of the mass within one standard deviation
        inside = (weight.abs() < D_MODEL ** -0.5).float().mean().item()
        assert inside == pytest.approx(0.6827, abs=5 * math.sqrt(0.2165 / n))
        scaled = weight * model.embed_scale
        assert scaled.std().item() == pytest.approx(1.0, rel=5 * math.sqrt(0.5 / n))


def test_biases_pad_rows_and_layer_norms():
    model = build(pre_norm=True)
    for name, param in model.named_parameters():
        if name.endswith("bias"):
            assert torch.count_nonzero(param) == 0, name
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            assert torch.equal(module.weight, torch.ones_like(module.weight))
            assert torch.equal(module.bias, torch.zeros_like(module.bias))
    assert torch.count_nonzero(model.src_embed.weight[model.pad_id]) == 0
    assert torch.count_nonzero(model.tgt_embed.weight[model.pad_id]) == 0


def test_shared_and_tied_embeddings_keep_one_matrix():
    torch.manual_seed(0)
    model = TransformerSeq2Seq(TGT_VOCAB, TGT_VOCAB, d_model=D_MODEL, heads=4, ff_dim=FF, enc_layers=1,
                               dec_layers=1, share_embeddings=True, tie_embeddings=True)
    assert model.generator.weight is model.tgt_embed.weight is model.src_embed.weight
    weight = model.tgt_embed.weight.detach()
    assert torch.count_nonzero(weight[model.pad_id]) == 0
    assert weight.std().item() == pytest.approx(D_MODEL ** -0.5, rel=0.05)  # the embedding's init wins


def test_initial_loss_is_near_log_vocab():
    """The untrained model's logits are small (Glorot output layer over a LayerNorm-ed state), so
    its loss on random targets is near log(vocab): a fact about the whole initialised network."""
    model = build(pre_norm=True).eval()
    src = torch.randint(4, SRC_VOCAB, (8, 7))
    tgt = torch.randint(4, TGT_VOCAB, (8, 6))
    mask = torch.ones_like(src, dtype=torch.bool)
    with torch.no_grad():
        logits = model(src, mask, torch.full((8,), 7), tgt).logits  # (batch, tgt_len, vocab)
        loss = nn.functional.cross_entropy(logits.reshape(-1, TGT_VOCAB), torch.randint(4, TGT_VOCAB, (48,)))
    assert loss.item() == pytest.approx(math.log(TGT_VOCAB), abs=0.2)
