"""attnmt.models.ensemble: an ensemble of one decodes exactly as its model, an ensemble of a model
with itself as the model, and the members' probabilities are averaged (checked against an
independent float64 computation) in greedy, beam, n-best and teacher-forced scoring alike."""

import pytest
import torch

from attnmt.models.ensemble import EnsembleModel
from attnmt.models.rnn import RNNSeq2Seq
from attnmt.models.transformer import TransformerSeq2Seq
from attnmt.decoding.search import beam_search, greedy_search, sample_search

from support.toy import SRC_VOCAB, TGT_VOCAB, padded_batch, target

LENGTHS = [5, 2, 7, 4]


def rnn(seed: int):
    torch.manual_seed(seed)
    return RNNSeq2Seq(SRC_VOCAB, TGT_VOCAB, emb_dim=8, enc_hidden=8, dec_hidden=16, attn_dim=12,
                      dropout=0.0).double().eval()


def transformer(seed: int):
    torch.manual_seed(seed)
    return TransformerSeq2Seq(SRC_VOCAB, TGT_VOCAB, d_model=16, heads=4, ff_dim=32, enc_layers=2,
                              dec_layers=2, dropout=0.0).double().eval()


def searches(model, src):
    """Greedy, beam (n-best of 3) and seeded sampling results of `model` on `src`."""
    common = dict(max_len_ratio=1.5, max_len_offset=3)
    return {"greedy": greedy_search(model, *src, **common),
            "beam": beam_search(model, *src, beam_size=3, length_penalty=1.0, **common),
            "sample": sample_search(model, *src, topk=4, generator=torch.Generator().manual_seed(5), **common)}


def assert_same_results(a, b, *, exact: bool):
    for name in a:
        for hyps_a, hyps_b in zip(a[name].nbest, b[name].nbest):
            assert [h.tokens for h in hyps_a] == [h.tokens for h in hyps_b], name
            for ha, hb in zip(hyps_a, hyps_b):
                if exact:
                    assert (ha.score, ha.log_prob) == (hb.score, hb.log_prob)
                    assert torch.equal(ha.attention, hb.attention)
                else:
                    assert ha.score == pytest.approx(hb.score, abs=1e-9)
                    assert torch.allclose(ha.attention, hb.attention, atol=1e-12)


@pytest.mark.parametrize("make", [rnn, transformer])
def test_an_ensemble_of_one_is_the_model(make):
    model, src = make(1), padded_batch(LENGTHS)
    ensemble = EnsembleModel([model])
    assert_same_results(searches(ensemble, src), searches(model, src), exact=True)
    tgt_in = target(len(LENGTHS), 6)
    assert torch.equal(ensemble(*src, tgt_in).logits, model(*src, tgt_in).logits)


@pytest.mark.parametrize("make", [rnn, transformer])
def test_an_ensemble_of_a_model_with_itself_is_the_model(make):
    model, src = make(1), padded_batch(LENGTHS)
    assert_same_results(searches(EnsembleModel([model, model]), src), searches(model, src), exact=False)
    tgt_in = target(len(LENGTHS), 6)
    got = EnsembleModel([model, model])(*src, tgt_in).logits  # (batch, tgt_len, vocab)
    assert torch.allclose(got, model(*src, tgt_in).logits.log_softmax(-1), atol=1e-12)


def reference_step_log_probs(members, src, prev_ids):
    """log(mean_m softmax(logits_m)) after one decode step, summed by hand in float64."""
    probs = 0.0
    for model in members:
        logits, _, _ = model.decode_step(prev_ids, model.init_state(model.encode(*src)))
        probs = probs + logits.double().softmax(-1) / len(members)
    return probs.log()


def test_each_step_averages_the_members_probabilities():
    members, src = [rnn(1), transformer(2), rnn(3)], padded_batch(LENGTHS)
    ensemble = EnsembleModel(members)
    prev_ids = torch.full((len(LENGTHS),), 2)
    logits, _, attn = ensemble.decode_step(prev_ids, ensemble.init_state(ensemble.encode(*src)))
    assert torch.allclose(logits, reference_step_log_probs(members, src, prev_ids), atol=1e-12)
    assert torch.allclose(logits.exp().sum(-1), torch.ones(len(LENGTHS), dtype=torch.float64))
    member_attn = [m.decode_step(prev_ids, m.init_state(m.encode(*src)))[2] for m in members]
    assert torch.allclose(attn, sum(member_attn) / 3)


def test_stepwise_decoding_equals_the_teacher_forced_pass():
    """decode_step, state reordering included, gives what forward gives (scoring and search agree)."""
    ensemble, src = EnsembleModel([rnn(1), transformer(2)]), padded_batch(LENGTHS)
    tgt_in = target(len(LENGTHS), 5)
    full = ensemble(*src, tgt_in, need_attention=True)
    flip = torch.arange(len(LENGTHS) - 1, -1, -1)
    state = ensemble.reorder_state(ensemble.init_state(ensemble.encode(*src)), flip)
    state = ensemble.reorder_state(state, flip)  # back in order: reordering twice is the identity
    for t in range(tgt_in.shape[1]):
        logits, state, attn = ensemble.decode_step(tgt_in[:, t], state)
        assert torch.allclose(logits, full.logits[:, t], atol=1e-10)
        assert torch.allclose(attn, full.attention[:, t], atol=1e-10)


def test_layer_and_head_selection_needs_transformer_members():
    with pytest.raises(ValueError, match="every member of the ensemble"):
        EnsembleModel([transformer(1), rnn(2)]).set_attention_view(layer=0)
    with pytest.raises(ValueError, match="at least one model"):
        EnsembleModel([])
