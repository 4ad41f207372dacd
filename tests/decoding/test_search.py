"""Tests for attnmt.decoding.search: exact on a known model, beam 1 = greedy, batch invariance, learning."""

import copy
import itertools
import logging
import math
import time

import pytest
import torch
from torch import Tensor, nn

from attnmt.models.rnn import RNNSeq2Seq
from attnmt.decoding.search import beam_search, gnmt_penalty, greedy_search


PAD, BOS, EOS = 0, 2, 3
DIGITS = range(4, 14)  # ten digits after the four specials
VOCAB = 14


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny tensors: one thread is fastest, and spinning OpenMP threads collapse on a busy machine
    (measured: a training step takes 57 ms with 1 thread, 1.1 s with 2 on a loaded 2-core box)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class BigramModel(nn.Module):
    """Next-token log-probs depend only on the previous token, so exact answers are known."""

    def __init__(self, log_probs: Tensor):
        super().__init__()
        self.log_probs = log_probs  # (vocab, vocab): row = previous token

    def encode(self, src_ids, src_mask, src_lengths):
        return src_mask

    def init_state(self, src_mask):
        return {"src_mask": src_mask}

    def decode_step(self, prev_ids, state):
        mask = state["src_mask"].double()
        return self.log_probs[prev_ids], state, mask / mask.sum(-1, keepdim=True)

    def reorder_state(self, state, index, *, within_sentences=False):
        return {name: value.index_select(0, index) for name, value in state.items()}


def random_bigram(seed: int, vocab: int = 6) -> BigramModel:
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(vocab, vocab, generator=gen, dtype=torch.float64) * 2
    return BigramModel(logits.log_softmax(-1))


def source(lengths) -> tuple[Tensor, Tensor, Tensor]:
    lengths = torch.tensor(lengths)
    mask = torch.arange(int(lengths.max())) < lengths[:, None]  # (batch, src_len)
    return torch.where(mask, 5, PAD), mask, lengths


def gnmt_lp(length: int, alpha: float) -> float:
    """Wu et al. 2016, eq. 14, written here independently of attnmt.decoding.search: lp(Y) = (5 + |Y|)^alpha / (5 + 1)^alpha."""
    return (5 + length) ** alpha / 6 ** alpha


def test_gnmt_penalty_follows_the_paper():
    assert gnmt_lp(7, 1.0) == 2.0 and gnmt_lp(3, 0.0) == 1.0  # the oracle itself, by hand
    for length in range(1, 30):
        for alpha in (0.0, 0.6, 1.0, 2.5):
            assert gnmt_penalty(length, alpha) == pytest.approx(gnmt_lp(length, alpha), rel=1e-12)


def exhaustive_best(model: BigramModel, max_len: int, alpha: float, top: int):
    """All sequences of at most max_len tokens: ended by eos, or cut at max_len; best first.
    Scores use this file's own GNMT penalty (gnmt_lp), not the code's."""
    vocab = model.log_probs.shape[0]
    scored = []
    for length in range(1, max_len + 1):
        for seq in itertools.product(range(vocab), repeat=length):
            if EOS in seq[:-1] or (length < max_len and seq[-1] != EOS):
                continue
            prev, logp = BOS, 0.0
            for token in seq:
                logp, prev = logp + model.log_probs[prev, token].item(), token
            scored.append((logp / gnmt_lp(length, alpha), [t for t in seq if t != EOS]))
    return sorted(scored, key=lambda pair: pair[0], reverse=True)[:top]


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_wide_beam_is_exhaustive_search(seed, alpha):
    model = random_bigram(seed)
    max_len = 4  # 6**4 beams keep every prefix: nothing is pruned
    result = beam_search(model, *source([1]), beam_size=6 ** 4, length_penalty=alpha,
                         max_len_ratio=0.0, max_len_offset=max_len)
    expected = exhaustive_best(model, max_len, alpha, top=5)
    got = result.nbest[0][:5]
    assert [h.tokens for h in got] == [tokens for _, tokens in expected]
    assert [h.score for h in got] == pytest.approx([score for score, _ in expected])


def test_beam_finds_what_greedy_misses():
    log_probs = torch.full((6, 6), -1e9, dtype=torch.float64)
    log_probs[BOS, 4], log_probs[BOS, 5] = math.log(0.6), math.log(0.4)
    log_probs[4, EOS], log_probs[4, 4], log_probs[4, 5] = map(math.log, (0.4, 0.3, 0.3))
    log_probs[5, EOS], log_probs[5, 4] = math.log(0.9), math.log(0.1)
    model = BigramModel(log_probs)
    greedy = greedy_search(model, *source([2]))
    beam = beam_search(model, *source([2]), beam_size=2, length_penalty=0.0)
    assert greedy.tokens == [[4]] and greedy.scores[0] == pytest.approx(math.log(0.24))
    assert beam.tokens == [[5]] and beam.scores[0] == pytest.approx(math.log(0.36))
    assert [h.tokens for h in beam.nbest[0]] == [[5], [4]]


@pytest.mark.parametrize("seed", range(10))
def test_beam_of_one_is_greedy_on_random_models(seed):
    model = random_bigram(seed, vocab=7)
    src = source([1, 3, 2])
    greedy = greedy_search(model, *src, max_len_ratio=1.0, max_len_offset=3)
    for alpha in (0.0, 1.0):
        beam = beam_search(model, *src, beam_size=1, length_penalty=alpha, max_len_ratio=1.0,
                           max_len_offset=3)
        assert beam.tokens == greedy.tokens
        assert beam.log_probs == pytest.approx(greedy.log_probs)


def test_length_budget_and_attention_layout():
    log_probs = torch.zeros(6, 6, dtype=torch.float64).log_softmax(-1)
    log_probs[:, 4] = 0.0  # token 4 always wins: never eos
    model = BigramModel(log_probs)
    src_ids, src_mask, lengths = source([1, 3])
    budget = {"max_len_ratio": 1.5, "max_len_offset": 2}
    for result in (greedy_search(model, src_ids, src_mask, lengths, **budget),
                   beam_search(model, src_ids, src_mask, lengths, beam_size=2, **budget)):
        assert result.tokens == [[4] * 3, [4] * 6]  # floor(1.5 * len + 2), no eos
        assert [a.shape for a in result.attention] == [(3, 1), (6, 3)]


def test_budget_lengths_not_the_source_lengths_set_the_budgets():
    """`budget_lengths` (what inputs.budget_lengths counts: the source in lower case where it has
    fewer tokens) replace the source lengths in floor(ratio * length + offset), in every search;
    the source itself is still read whole (one attention column per token)."""
    from attnmt.decoding.constraints import constrained_beam_search, constraint_batch
    from attnmt.decoding.search import sample_search

    log_probs = torch.full((6, 6), -20.0, dtype=torch.float64)
    log_probs[:, 4] = 0.0  # token 4 always: never eos
    model = BigramModel(log_probs)
    src_ids, src_mask, lengths = source([4, 3])
    budget = {"max_len_ratio": 1.5, "max_len_offset": 2, "budget_lengths": torch.tensor([2, 0])}
    for result in (greedy_search(model, src_ids, src_mask, lengths, **budget),
                   beam_search(model, src_ids, src_mask, lengths, beam_size=2, **budget),
                   sample_search(model, src_ids, src_mask, lengths, generator=torch.Generator().manual_seed(0),
                                 **budget),
                   constrained_beam_search(model, src_ids, src_mask, lengths, constraint_batch([[[4]], [[4]]]),
                                           beam_size=2, **budget)):
        assert [len(t) for t in result.tokens] == [5, 2]  # floor(1.5 * 2 + 2), floor(1.5 * 0 + 2): no eos
        assert [a.shape for a in result.attention] == [(5, 4), (2, 3)]
    with pytest.raises(ValueError, match="budget_lengths"):
        greedy_search(model, src_ids, src_mask, lengths, budget_lengths=torch.tensor([1, 2, 3]))


def test_misuse_raises_value_error():
    model = random_bigram(0)
    src_ids, src_mask, lengths = source([2, 1])
    with pytest.raises(ValueError, match="beam_size >= 1"):
        beam_search(model, src_ids, src_mask, lengths, beam_size=0)
    with pytest.raises(ValueError, match="length_penalty >= 0"):
        beam_search(model, src_ids, src_mask, lengths, length_penalty=-0.5)
    with pytest.raises(ValueError, match=r"src_lengths \(batch,\)"):
        greedy_search(model, src_ids, src_mask, lengths[:1])


# ---- a real RNN trained to reverse digit strings ------------------------------------------------


def reversal_batch(gen: torch.Generator, batch: int, min_len: int = 3, max_len: int = 8):
    """Random digit strings and their reversal: src_ids, src_mask, src_lengths, tgt_in, tgt_out."""
    lengths = torch.randint(min_len, max_len + 1, (batch,), generator=gen)
    src_len = int(lengths.max())
    src_mask = torch.arange(src_len) < lengths[:, None]  # (batch, src_len)
    src_ids = torch.randint(DIGITS[0], VOCAB, (batch, src_len), generator=gen)
    src_ids = src_ids.masked_fill(src_mask.logical_not(), PAD)
    backwards = (lengths[:, None] - 1 - torch.arange(src_len)).clamp(min=0)  # (batch, src_len)
    reversed_ids = src_ids.gather(1, backwards).masked_fill(src_mask.logical_not(), PAD)
    tgt_in = torch.cat([torch.full((batch, 1), BOS), reversed_ids], dim=1)  # (batch, tgt_len)
    tgt_out = torch.cat([reversed_ids, torch.full((batch, 1), PAD)], dim=1)
    tgt_out = tgt_out.scatter(1, lengths[:, None], EOS)
    return src_ids, src_mask, lengths, tgt_in, tgt_out


def exact_match(result, tgt_out, lengths) -> float:
    gold = [row[:n] for row, n in zip(tgt_out.tolist(), lengths.tolist())]
    return sum(hyp == ref for hyp, ref in zip(result.tokens, gold)) / len(gold)


@pytest.fixture(scope="module")
def reverser():
    """A small Bahdanau model trained until it reverses held-out strings (at most 2000 updates:
    a fixed, seeded schedule, so the outcome does not depend on the machine's speed)."""
    torch.manual_seed(0)
    model = RNNSeq2Seq(VOCAB, VOCAB, emb_dim=32, enc_hidden=32, dec_hidden=64, attn_dim=32,
                       dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    val_gen = torch.Generator().manual_seed(1)
    val_src_ids, val_mask, val_lengths, _, val_out = reversal_batch(val_gen, 200)
    start, step, accuracy = time.monotonic(), 0, 0.0
    while step < 2000:
        src_ids, src_mask, lengths, tgt_in, tgt_out = reversal_batch(gen, 64)
        model.train()
        logits = model(src_ids, src_mask, lengths, tgt_in).logits
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(),
                                           ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        if step % 50 == 0:
            accuracy = exact_match(greedy_search(model, val_src_ids, val_mask, val_lengths),
                                   val_out, val_lengths)
            if accuracy >= 0.99:
                break
    elapsed = time.monotonic() - start
    logging.getLogger(__name__).info("reverser: %d steps, %.1f s, val exact match %.3f",
                                     step, elapsed, accuracy)
    return model.eval()


@pytest.fixture(scope="module")
def test_set():
    return reversal_batch(torch.Generator().manual_seed(2), 200)


def test_trained_model_reverses_with_greedy_and_beam(reverser, test_set):
    src_ids, src_mask, lengths, _, tgt_out = test_set
    greedy = greedy_search(reverser, src_ids, src_mask, lengths)
    beam = beam_search(reverser, src_ids, src_mask, lengths, beam_size=4)
    assert exact_match(greedy, tgt_out, lengths) >= 0.95
    assert exact_match(beam, tgt_out, lengths) >= 0.95
    for attention, hyp, n in zip(beam.attention, beam.tokens, lengths.tolist()):
        assert attention.shape == (len(hyp) + 1, n)  # eos row included; real source columns
        torch.testing.assert_close(attention.sum(-1), torch.ones(len(hyp) + 1))


def test_beam_of_one_equals_greedy_on_trained_model(reverser, test_set):
    src_ids, src_mask, lengths, _, _ = test_set
    greedy = greedy_search(reverser, src_ids, src_mask, lengths)
    beam = beam_search(reverser, src_ids, src_mask, lengths, beam_size=1)
    assert beam.tokens == greedy.tokens
    assert beam.log_probs == pytest.approx(greedy.log_probs, abs=1e-5)
    for a, b in zip(beam.attention, greedy.attention):
        torch.testing.assert_close(a, b)


def test_nbest_sorted_and_beam_scores_at_least_greedy(reverser, test_set):
    src_ids, src_mask, lengths = (x[:50] for x in test_set[:3])
    greedy = greedy_search(reverser, src_ids, src_mask, lengths)
    beam = beam_search(reverser, src_ids, src_mask, lengths, beam_size=4, length_penalty=0.0)
    for hyps, greedy_score in zip(beam.nbest, greedy.scores):
        scores = [h.score for h in hyps]
        assert len(hyps) == 4 and scores == sorted(scores, reverse=True)
        assert scores[0] >= greedy_score - 1e-5
        assert len({tuple(h.tokens) for h in hyps}) == len(hyps)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_translation_does_not_depend_on_the_batch(reverser, test_set, search):
    model = copy.deepcopy(reverser).double()  # float64: no near-ties flipped by summation order
    src_ids, src_mask, lengths = (x[:12] for x in test_set[:3])
    src_ids = torch.cat([src_ids, torch.full((12, 2), PAD)], dim=1)  # extra padding columns
    src_mask = torch.cat([src_mask, torch.zeros(12, 2, dtype=torch.bool)], dim=1)
    decode = greedy_search if search == "greedy" else lambda *a: beam_search(*a, beam_size=3)
    batched = decode(model, src_ids, src_mask, lengths)
    for i, n in enumerate(lengths.tolist()):
        alone = decode(model, src_ids[i:i + 1, :n], src_mask[i:i + 1, :n], lengths[i:i + 1])
        assert alone.tokens[0] == batched.tokens[i]
        assert alone.scores[0] == pytest.approx(batched.scores[i], abs=1e-9)
        torch.testing.assert_close(alone.attention[0], batched.attention[i])


def test_finished_sentences_leave_the_beam(reverser, monkeypatch):
    src_ids, src_mask, lengths, _, _ = reversal_batch(torch.Generator().manual_seed(3), 64)
    short = torch.argmin(lengths).item()
    long = torch.argmax(lengths).item()
    pick = torch.tensor([short, long])
    rows = []
    reorder = reverser.reorder_state
    monkeypatch.setattr(reverser, "reorder_state", lambda state, index, **kw: rows.append(len(index))
                        or reorder(state, index, **kw))
    beam_search(reverser, src_ids[pick], src_mask[pick], lengths[pick], beam_size=3)
    assert rows[0] == 6 and rows[-1] == 3  # both sentences, then the long one alone


def test_beam_search_stops_when_no_live_hypothesis_can_win():
    """Eos has probability 0.9 after every token. Beam 2, by hand: step 1 finishes <eos>
    (0.9) and keeps "4" (0.06) and "5" (0.04); step 2 finishes "4 <eos>" and "5 <eos>", so the
    sentence holds 3 >= beam finished hypotheses, and the best live one ("4 4", 0.0036) cannot
    beat 0.9 (alpha 0: log-probs only fall). The search ends after 2 of its 30 steps."""
    probs = torch.full((6, 6), 1e-12, dtype=torch.float64)
    probs[:, EOS], probs[:, 4], probs[:, 5] = 0.9, 0.06, 0.04
    model = BigramModel(probs.log())
    steps = []
    decode_step = model.decode_step
    model.decode_step = lambda prev_ids, state: steps.append(len(prev_ids)) or decode_step(prev_ids, state)
    result = beam_search(model, *source([1]), beam_size=2, length_penalty=0.0, max_len_ratio=0.0,
                         max_len_offset=30)
    assert steps == [2, 2]
    assert [h.tokens for h in result.nbest[0]] == [[], [4]]
    assert result.scores[0] == pytest.approx(math.log(0.9))


def test_greedy_drops_finished_sentences_without_changing_results(monkeypatch):
    """Rows that ended leave the greedy batch at each check; the results stay those of a search
    that keeps every row to the end (check_every past the budget: no check at all)."""
    log_probs = torch.randn(6, 6, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    log_probs[:, EOS] = -1e9  # never eos: each sentence runs to its own budget
    model = BigramModel(log_probs.log_softmax(-1))
    src = source([1, 4, 2, 6])  # budgets 1 + 2 * len: 3, 9, 5, 13 steps
    sizes = []
    reorder = model.reorder_state
    monkeypatch.setattr(model, "reorder_state", lambda state, index, **kw: sizes.append(len(index))
                        or reorder(state, index, **kw))
    compacted = greedy_search(model, *src, max_len_ratio=2.0, max_len_offset=1, check_every=4)
    assert sizes == [3, 2, 1]  # after steps 4, 8 and 12: the 3-, 5- and 9-step sentences left
    kept = greedy_search(model, *src, max_len_ratio=2.0, max_len_offset=1, check_every=100)
    assert [len(t) for t in compacted.tokens] == [3, 9, 5, 13]
    assert compacted.tokens == kept.tokens
    assert compacted.log_probs == kept.log_probs
    for a, b in zip(compacted.attention, kept.attention):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


@pytest.mark.parametrize("seed", range(3))
def test_token_log_probs_are_the_models_along_each_hypothesis(seed):
    """Every search's token_log_probs, against the bigram table read along the output (eos last
    when produced): one per attention row, summing to log_prob."""
    from attnmt.decoding.constraints import constrained_beam_search, constraint_batch
    from attnmt.decoding.search import sample_search

    model, src = random_bigram(seed), source([1, 3, 2])
    found = [greedy_search(model, *src, max_len_ratio=0.0, max_len_offset=5),
             beam_search(model, *src, beam_size=3, max_len_ratio=0.0, max_len_offset=5),
             sample_search(model, *src, topk=0, generator=torch.Generator().manual_seed(seed),
                           max_len_ratio=0.0, max_len_offset=5),
             constrained_beam_search(model, *src, constraint_batch([[[4]], [], [[5, 4]]]), beam_size=1,
                                     max_len_ratio=0.0, max_len_offset=5)]
    for result in found:
        for hyps in result.nbest:
            for hyp in hyps:
                produced = hyp.tokens + [EOS] * (len(hyp.attention) - len(hyp.tokens))
                expected = [model.log_probs[p, t].item() for p, t in zip([BOS] + produced[:-1], produced)]
                assert hyp.token_log_probs == pytest.approx(expected, abs=1e-6)
                assert sum(hyp.token_log_probs) == pytest.approx(hyp.log_prob, abs=1e-6)
