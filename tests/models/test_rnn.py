"""Tests for attnmt.models.rnn: shapes, the encoder, cached keys, teacher forcing, gradients. What
both models promise (fast path equals stepping, padding, beam reordering) is in test_seq2seq.py."""

import pytest
import torch
from torch import nn

from attnmt.attention import AdditiveAttention
from attnmt.models.rnn import ATTENTION_TYPES, GRUEncoder, RNNSeq2Seq

from support.toy import SRC_VOCAB, TGT_VOCAB, padded_batch, target


def tiny_model(attention="bahdanau", *, tie=False, dropout=0.0, layers=1, dtype=torch.float64):
    torch.manual_seed(0)
    model = RNNSeq2Seq(SRC_VOCAB, TGT_VOCAB, emb_dim=8, enc_hidden=8, dec_hidden=16, attn_dim=12,
                       layers=layers, dropout=dropout, attention=attention, tie_embeddings=tie)
    return model.to(dtype).eval()


@pytest.mark.parametrize("attention", ATTENTION_TYPES)
@pytest.mark.parametrize("tie", [False, True])
def test_forward_shapes_and_attention_weights(attention, tie):
    model = tiny_model(attention, tie=tie)
    src_ids, src_mask, lengths = padded_batch([5, 2, 4], extra_pad=1)
    out = model(src_ids, src_mask, lengths, target(3, 7))
    assert out.logits.shape == (3, 7, TGT_VOCAB)
    assert out.attention.shape == (3, 7, 6)
    torch.testing.assert_close(out.attention.sum(-1), torch.ones(3, 7, dtype=torch.float64))
    assert (out.attention.masked_select(src_mask.logical_not()[:, None, :]) == 0).all()


def test_encoder_states_match_unpacked_gru_on_real_tokens():
    torch.manual_seed(0)
    encoder = GRUEncoder(SRC_VOCAB, 8, 6, dec_hidden=10, layers=2).double().eval()
    src_ids, src_mask, lengths = padded_batch([5, 2, 4], extra_pad=2)
    enc = encoder(src_ids, src_mask, lengths)
    assert enc.states.shape == (3, 7, 12) and enc.final.shape == (3, 10)
    for i, n in enumerate(lengths.tolist()):  # reference: the GRU on the real tokens only
        states, final = encoder.rnn(encoder.src_embed(src_ids[i:i + 1, :n]))
        torch.testing.assert_close(enc.states[i, :n], states[0])
        assert (enc.states[i, n:] == 0).all()
        fwd_last, bwd_first = final[-2, 0], final[-1, 0]  # top layer, forward / backward
        torch.testing.assert_close(fwd_last, states[0, -1, :6])
        torch.testing.assert_close(bwd_first, states[0, 0, 6:])
        expected = torch.tanh(encoder.bridge(torch.cat([fwd_last, bwd_first])))
        torch.testing.assert_close(enc.final[i], expected)


@pytest.mark.parametrize("attention", ["bahdanau", "luong-general"])
def test_keys_projected_once_and_equal_to_recomputation(attention, monkeypatch):
    model = tiny_model(attention)
    src_ids, src_mask, lengths = padded_batch([4, 2])
    calls = []
    project = type(model.decoder.attention).project_keys
    monkeypatch.setattr(type(model.decoder.attention), "project_keys",
                        lambda self, keys: calls.append(keys.shape) or project(self, keys))
    model(src_ids, src_mask, lengths, target(2, 6))
    assert len(calls) == 1
    state = model.init_state(model.encode(src_ids, src_mask, src_lengths=lengths))
    recomputed_keys = project(model.decoder.attention, state["enc_states"])
    torch.testing.assert_close(state["proj_keys"], recomputed_keys)
    prev_ids = torch.tensor([2, 2])
    cached = model.decode_step(prev_ids, state)
    without = {name: value for name, value in state.items() if name != "proj_keys"}
    recomputed = model.decode_step(prev_ids, without)  # the attention projects the keys itself
    torch.testing.assert_close(cached[0], recomputed[0])
    torch.testing.assert_close(cached[2], recomputed[2])


@pytest.mark.parametrize("attention", ATTENTION_TYPES)
def test_teacher_forcing_zero_feeds_own_argmax(attention):
    model = tiny_model(attention)
    src_ids, src_mask, lengths = padded_batch([5, 3, 4])
    tgt_in = target(3, 6)
    free = model(src_ids, src_mask, lengths, tgt_in, teacher_forcing=0.0)
    state = model.init_state(model.encode(src_ids, src_mask, lengths))
    prev_ids = tgt_in[:, 0]
    for t in range(tgt_in.shape[1]):
        logits, state, _ = model.decode_step(prev_ids, state)
        torch.testing.assert_close(free.logits[:, t], logits)
        prev_ids = logits.argmax(-1)
    forced = model(src_ids, src_mask, lengths, tgt_in, teacher_forcing=1.0)
    torch.testing.assert_close(forced.logits[:, 0], free.logits[:, 0])
    assert not torch.allclose(forced.logits, free.logits)


def test_teacher_forcing_mix_is_reproducible_with_seed():
    model = tiny_model()
    src_ids, src_mask, lengths = padded_batch([5, 3, 4])
    tgt_in = target(3, 8)
    runs = []
    for _ in range(2):
        torch.manual_seed(7)
        runs.append(model(src_ids, src_mask, lengths, tgt_in, teacher_forcing=0.5).logits)
    torch.testing.assert_close(runs[0], runs[1], atol=0, rtol=0)


def test_tied_embeddings_share_one_parameter():
    model = tiny_model(tie=True)
    assert model.decoder.generator.weight is model.decoder.tgt_embed.weight
    n_params = sum(p.numel() for p in model.parameters())
    untied = sum(p.numel() for p in tiny_model(tie=False).parameters())
    assert n_params < untied


@pytest.mark.parametrize("attention", ATTENTION_TYPES)
@pytest.mark.parametrize("tie", [False, True])
def test_every_parameter_gets_a_gradient(attention, tie):
    model = tiny_model(attention, tie=tie, dropout=0.3, layers=2).train()
    src_ids, src_mask, lengths = padded_batch([5, 3, 4])
    tgt_in = target(3, 6)
    for ratio in (1.0, 0.5):
        model.zero_grad()
        logits = model(src_ids, src_mask, lengths, tgt_in, teacher_forcing=ratio).logits
        nn.functional.cross_entropy(logits.flatten(0, 1), tgt_in.flatten()).backward()
        for name, param in model.named_parameters():
            assert param.grad is not None and param.grad.isfinite().all(), name
            assert param.grad.abs().sum() > 0, name


def test_bahdanau_query_is_the_previous_state():
    model = tiny_model()
    src_ids, src_mask, lengths = padded_batch([5, 3])
    enc = model.encode(src_ids, src_mask, lengths)
    state = model.init_state(enc)
    attn = model.decoder.attention
    assert isinstance(attn, AdditiveAttention)
    expected = attn(enc.final, enc.states, enc.states, src_mask).weights
    _, _, weights = model.decode_step(torch.tensor([2, 2]), state)
    torch.testing.assert_close(weights, expected)


def test_misuse_raises_value_error():
    with pytest.raises(ValueError, match="attention must be one of"):
        RNNSeq2Seq(5, 5, attention="luong-concat")
    with pytest.raises(ValueError, match="luong-dot.*hidden=16, enc_dim=20"):
        RNNSeq2Seq(5, 5, enc_hidden=10, dec_hidden=16, attention="luong-dot")
    model = tiny_model()
    src_ids, src_mask, lengths = padded_batch([5, 3])
    with pytest.raises(ValueError, match="tgt_in must be"):
        model(src_ids, src_mask, lengths, target(3, 4))
    with pytest.raises(ValueError, match="teacher_forcing must be in"):
        model(src_ids, src_mask, lengths, target(2, 4), teacher_forcing=1.5)
    with pytest.raises(ValueError, match="src_lengths must lie in"):
        model(src_ids, src_mask, torch.tensor([6, 3]), target(2, 4))
    with pytest.raises(ValueError, match="src_mask"):
        model(src_ids, src_mask[:, :3], lengths, target(2, 4))
    state = model.init_state(model.encode(src_ids, src_mask, lengths))
    with pytest.raises(ValueError, match="prev_ids must be"):
        model.decode_step(torch.tensor([2]), state)


@pytest.mark.parametrize("ratio", [0.25, 0.5, 0.75])
def test_teacher_forcing_mixes_gold_and_predicted_tokens(ratio):
    """A probe on the decoder's embedding records the token fed at every step. The gold tokens
    are one id the model can never predict (its output bias is -1e4), so each step's feed is
    either provably gold or provably the previous step's argmax, and the share of gold steps
    follows the ratio: over 400 coins, |share - ratio| < 0.1 is more than 4 standard deviations."""
    model = tiny_model()
    never = 7
    with torch.no_grad():
        model.decoder.generator.bias[never] = -1e4
    src_ids, src_mask, lengths = padded_batch([5, 3])
    tgt_len = 401
    tgt_in = torch.full((2, tgt_len), never)
    tgt_in[:, 0] = 2  # bos
    fed = []
    embed = model.decoder.embed
    model.decoder.embed = lambda ids: fed.append(ids.clone()) or embed(ids)
    torch.manual_seed(0)
    logits = model(src_ids, src_mask, lengths, tgt_in, teacher_forcing=ratio).logits
    assert len(fed) == tgt_len and torch.equal(fed[0], tgt_in[:, 0])
    gold_steps = 0
    for t in range(1, tgt_len):
        if torch.equal(fed[t], tgt_in[:, t]):
            gold_steps += 1
        else:  # the model's own prediction, for the whole batch
            assert torch.equal(fed[t], logits[:, t - 1].argmax(-1)), t
            assert (fed[t] != never).all()
    assert abs(gold_steps / (tgt_len - 1) - ratio) < 0.1
