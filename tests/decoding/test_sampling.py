"""Random sampling (search.sample_search, Translator.translate(sampling_topk=...)): seedable,
top-k respected, token frequencies follow the tempered softmax, and topk=1 is greedy search."""

import pytest
import torch

from attnmt.models.transformer import TransformerSeq2Seq
from attnmt.decoding.search import greedy_search, sample_search

VOCAB = 12


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = TransformerSeq2Seq(VOCAB, VOCAB, d_model=16, heads=2, ff_dim=32, enc_layers=1, dec_layers=1,
                           dropout=0.0, max_positions=64).eval()
    with torch.no_grad():  # spread-out, input-dependent distributions
        m.generator.weight.mul_(3.0)
    return m


def sources(batch: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 7, (batch,), generator=g)
    ids = torch.randint(4, VOCAB, (batch, int(lengths.max())), generator=g)
    mask = torch.arange(ids.shape[1])[None] < lengths[:, None]  # (batch, src_len)
    return ids.masked_fill(~mask, 0), mask, lengths


def draw(model, batch=16, seed=1, **kwargs):
    gen = torch.Generator().manual_seed(seed)
    return sample_search(model, *sources(batch), generator=gen, max_len_ratio=1.0, max_len_offset=6, **kwargs)


def test_same_seed_same_samples_and_other_seeds_differ(model):
    a, b = draw(model, seed=5, topk=0), draw(model, seed=5, topk=0)
    assert a.tokens == b.tokens and a.scores == b.scores
    assert draw(model, seed=6, topk=0).tokens != a.tokens


@pytest.mark.parametrize("topk", [2, 3])
def test_every_sampled_token_is_among_the_topk(model, topk):
    found = draw(model, batch=24, topk=topk, temperature=2.0)
    src_ids, src_mask, src_lengths = sources(24)
    for row, tokens in enumerate(found.tokens):
        tgt_in = torch.tensor([[model.bos_id, *tokens]])  # teacher-forced full pass, not the cached steps
        logits = model(src_ids[row:row + 1, : src_lengths[row]], src_mask[row:row + 1, : src_lengths[row]],
                       src_lengths[row:row + 1], tgt_in).logits[0]  # (len + 1, vocab)
        chosen = logits[torch.arange(len(tokens)), tokens]  # (len,) the sampled tokens' logits
        ranks = (logits[: len(tokens)] > chosen[:, None]).sum(dim=1)  # tokens more probable than the chosen
        assert all(int(r) < topk for r in ranks), (row, tokens, ranks)


def test_topk_one_is_greedy_search(model):
    src = sources(16)
    greedy = greedy_search(model, *src, max_len_ratio=1.0, max_len_offset=6)
    sampled = sample_search(model, *src, topk=1, temperature=3.0, max_len_ratio=1.0, max_len_offset=6)
    assert sampled.tokens == greedy.tokens
    for a, b in zip(sampled.log_probs, greedy.log_probs):
        assert abs(a - b) < 1e-5


def test_first_token_frequencies_follow_the_tempered_softmax(model):
    n, temperature = 4000, 1.5
    src_ids, src_mask, src_lengths = sources(1)
    batch = (src_ids.expand(n, -1), src_mask.expand(n, -1), src_lengths.expand(n))
    found = sample_search(model, *batch, topk=0, temperature=temperature, generator=torch.Generator().manual_seed(3),
                          max_len_ratio=0.0, max_len_offset=1)  # one token each
    with torch.no_grad():
        logits = model(src_ids, src_mask, src_lengths, torch.tensor([[model.bos_id]])).logits[0, 0].double()
    expected = torch.softmax(logits / temperature, dim=0)  # (vocab,)
    first = torch.tensor([t[0] if t else model.eos_id for t in found.tokens])
    observed = torch.bincount(first, minlength=VOCAB).double() / n
    assert (observed - expected).abs().max() < 0.03  # ~4 standard errors at n=4000


def test_scores_are_untempered_log_probs(model):
    found = draw(model, batch=6, topk=0, temperature=0.5)
    src_ids, src_mask, src_lengths = sources(6)
    for row, (tokens, score) in enumerate(zip(found.tokens, found.scores)):
        n = int(src_lengths[row])
        full = tokens + ([model.eos_id] if len(tokens) < n + 6 else [])  # eos unless cut at the budget
        tgt_in = torch.tensor([[model.bos_id, *full[:-1]]])
        with torch.no_grad():
            logp = model(src_ids[row:row + 1, :n], src_mask[row:row + 1, :n], src_lengths[row:row + 1],
                         tgt_in).logits[0].double().log_softmax(-1)  # (len, vocab)
        assert abs(float(logp[torch.arange(len(full)), full].sum()) - score) < 1e-4


def test_bad_arguments(model):
    with pytest.raises(ValueError, match="topk"):
        draw(model, topk=-1)
    with pytest.raises(ValueError, match="temperature"):
        draw(model, topk=0, temperature=0.0)


def test_translator_sampling_is_seedable(toy_run):
    from attnmt.translator import Translator

    translator = Translator.load(toy_run, device="cpu")
    sentences = ["Hund katze haus .", "Rot blau .", "Mann frau kind ball wasser ."] * 4
    a = translator.translate(sentences, beam_size=1, sampling_topk=5, sampling_temperature=2.0, seed=7)
    b = translator.translate(sentences, beam_size=1, sampling_topk=5, sampling_temperature=2.0, seed=7)
    assert [r.tokens for r in a] == [r.tokens for r in b]
    with pytest.raises(ValueError, match="beam_size=1"):
        translator.translate(sentences, beam_size=3, sampling_topk=5)
