"""What both models (attnmt.models.rnn, attnmt.models.transformer) promise search and training,
checked the same way on each: incremental decoding equals the full forward pass, padding changes
no output, and reorder_state selects beams (keeping the source side in place when asked)."""

import pytest
import torch

from attnmt.models.rnn import ATTENTION_TYPES, RNNSeq2Seq
from attnmt.models.transformer import TransformerSeq2Seq
from attnmt.decoding.search import tile_index

from support.toy import BOS, SRC_VOCAB, TGT_VOCAB, padded_batch, target


def rnn(*, attention="bahdanau", tie=False):
    return RNNSeq2Seq(SRC_VOCAB, TGT_VOCAB, emb_dim=8, enc_hidden=8, dec_hidden=16, attn_dim=12,
                      dropout=0.0, attention=attention, tie_embeddings=tie)


def transformer(*, pre_norm=True, positions="sinusoidal", tie=False, activation="relu", scale=True):
    model = TransformerSeq2Seq(SRC_VOCAB, TGT_VOCAB, d_model=16, heads=4, ff_dim=32, enc_layers=2,
                               dec_layers=2, dropout=0.0, pre_norm=pre_norm, positions=positions,
                               tie_embeddings=tie, activation=activation, scale_embeddings=scale)
    if positions == "learned":  # learned positions start near zero: make them matter
        torch.nn.init.normal_(model.pos_embed.weight)
    return model


BUILDERS = {"rnn": rnn, "transformer": transformer}
# State entries that depend only on the source sentence (the documented source side of each model).
SOURCE_SIDE = {"rnn": lambda name: name in ("enc_states", "src_mask", "proj_keys"),
               "transformer": lambda name: name == "src_mask" or name.startswith("cross_")}


def spec(arch, **kwargs):
    label = "-".join([arch, *(str(v) if not isinstance(v, bool) else (k if v else f"no_{k}")
                               for k, v in kwargs.items())])
    return pytest.param(arch, kwargs, id=label)


# One of each kind of model, and every variant whose decoder computes differently.
MODELS = [spec("rnn", attention=a) for a in ATTENTION_TYPES] + [spec("transformer")]
VARIANTS = ([spec("rnn", attention=a, tie=t) for a in ATTENTION_TYPES for t in (False, True)]
            + [spec("transformer", pre_norm=p, positions=q, tie=True)
               for p in (True, False) for q in ("sinusoidal", "learned")]
            + [spec("transformer", pre_norm=False, positions="sinusoidal_halves", tie=True, activation=a, scale=s)
               for a, s in (("swish", True), ("gelu", False))])  # as imported Marian models are


def build(arch, kwargs, dtype=torch.float64):
    torch.manual_seed(0)
    return BUILDERS[arch](**kwargs).to(dtype).eval()


def full_forward(model, src_ids, src_mask, lengths, tgt_in):
    """The teacher-forced forward pass, with its attention (the Transformer gives it on request)."""
    extra = {"need_attention": True} if isinstance(model, TransformerSeq2Seq) else {}
    return model(src_ids, src_mask, lengths, tgt_in, **extra)


@pytest.mark.parametrize("arch, kwargs", VARIANTS)
def test_incremental_decoding_equals_full_forward(arch, kwargs):
    model = build(arch, kwargs)
    src_ids, src_mask, lengths = padded_batch([5, 2, 4], extra_pad=1)
    tgt_in = target(3, 6)
    out = full_forward(model, src_ids, src_mask, lengths, tgt_in)
    assert out.logits.shape == (3, 6, TGT_VOCAB) and out.attention.shape == (3, 6, 6)
    state = model.init_state(model.encode(src_ids, src_mask, lengths))
    for t in range(tgt_in.shape[1]):
        logits, state, attn = model.decode_step(tgt_in[:, t], state)
        torch.testing.assert_close(logits, out.logits[:, t], atol=1e-10, rtol=0)
        torch.testing.assert_close(attn, out.attention[:, t], atol=1e-10, rtol=0)


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
@pytest.mark.parametrize("arch, kwargs", MODELS)
def test_padding_does_not_change_logits(arch, kwargs, dtype, atol):
    model = build(arch, kwargs, dtype)
    src_ids, src_mask, lengths = padded_batch([3, 6, 2], extra_pad=3)
    tgt_in = target(3, 5)
    batched = full_forward(model, src_ids, src_mask, lengths, tgt_in)
    for i, n in enumerate(lengths.tolist()):
        one = slice(i, i + 1)
        alone = full_forward(model, src_ids[one, :n], src_mask[one, :n], lengths[one], tgt_in[one])
        torch.testing.assert_close(batched.logits[i], alone.logits[0], atol=atol, rtol=0)
        torch.testing.assert_close(batched.attention[i, :, :n], alone.attention[0], atol=atol, rtol=0)


@pytest.mark.parametrize("arch, kwargs", MODELS)
def test_reorder_state_selects_rows_and_decoding_goes_on(arch, kwargs):
    """After one step, rows [2, 2, 0] of the state decode on exactly as those rows of the full
    forward pass (in float32, as search runs)."""
    model = build(arch, kwargs, torch.float32)
    src_ids, src_mask, lengths = padded_batch([5, 3, 4])
    tgt_in = target(3, 5)
    full = full_forward(model, src_ids, src_mask, lengths, tgt_in).logits
    state = model.init_state(model.encode(src_ids, src_mask, lengths))
    _, state, _ = model.decode_step(tgt_in[:, 0], state)
    assert all(value.shape[0] == 3 for value in state.values())
    index = torch.tensor([2, 2, 0])
    reordered = model.reorder_state(state, index)
    assert reordered.keys() == state.keys()
    for name, value in state.items():
        assert torch.equal(reordered[name], value[index]), name
    for t in range(1, tgt_in.shape[1]):
        logits, reordered, _ = model.decode_step(tgt_in[index, t], reordered)
        torch.testing.assert_close(logits, full[index, t], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch, kwargs", MODELS)
def test_reorder_within_sentences_keeps_the_source_side(arch, kwargs):
    """Beam search's reorder of an unchanged set of sentences may leave the source side in place:
    the result equals the full reorder, only the source side is kept uncopied, and decoding goes
    on the same."""
    model = build(arch, kwargs)
    src_ids, src_mask, lengths = padded_batch([5, 3])
    state = model.init_state(model.encode(src_ids, src_mask, lengths))
    state = model.reorder_state(state, tile_index(2, 3))  # rows = 2 sentences x 3 beams
    _, state, _ = model.decode_step(torch.tensor([BOS, 4, 5, BOS, 6, 7]), state)
    index = torch.tensor([2, 2, 0, 4, 3, 5])  # each row from a row of its own sentence
    full = model.reorder_state(state, index)
    kept = model.reorder_state(state, index, within_sentences=True)
    assert kept.keys() == full.keys()
    for name in full:
        torch.testing.assert_close(kept[name], full[name], atol=0, rtol=0)
    source_side = {name for name in state if SOURCE_SIDE[arch](name)}
    assert "src_mask" in source_side and source_side != state.keys()  # both sides present
    assert {name for name in state if kept[name] is state[name]} == source_side  # not copied
    prev_ids = torch.tensor([4, 5, 6, 7, 8, 9])
    torch.testing.assert_close(model.decode_step(prev_ids, kept)[0], model.decode_step(prev_ids, full)[0])
