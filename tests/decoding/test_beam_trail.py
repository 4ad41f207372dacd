"""Beam search's step records (decoding.hypotheses.BeamTrail) give the outputs of the search they replaced.

The reference below is attnmt.decoding.search.beam_search as it stood before the trail (commit a040f13):
it copied every hypothesis' token, log-prob and attention history at every step. It is kept
here, verbatim but for its docstring, only as the reference that the new search must equal
token for token and bit for bit: tokens, scores, log-probs, token log-probs, attention, n-best.
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from attnmt.decoding.hypotheses import Hypothesis, SearchResult
# the reference below is kept verbatim: the search pieces under the private names it was written with
from attnmt.decoding.search import beam_search
from attnmt.decoding.search import check_search_args as _check_args
from attnmt.decoding.search import force_prefix as _force_prefix
from attnmt.decoding.search import gnmt_penalty, output_budget, tile_index
from attnmt.decoding.search import log_softmax as _log_softmax
from attnmt.decoding.search import prefix_budget as _prefix_budget
from attnmt.models import eval_mode
from attnmt.models.rnn import RNNSeq2Seq
from attnmt.models.transformer import TransformerSeq2Seq

from test_search import random_bigram, source

VOCAB, BOS, EOS = 9, 2, 3


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@torch.inference_mode()
def reference_beam_search(model: nn.Module, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor, *,
                beam_size: int = 5, length_penalty: float = 1.0, max_len_ratio: float = 2.0,
                max_len_offset: int = 10, bos_id: int = 2, eos_id: int = 3,
                prefix: Tensor | None = None) -> SearchResult:
    """The beam search of commit a040f13, kept verbatim as the reference."""
    _check_args(src_ids, src_mask, src_lengths, max_len_ratio, max_len_offset)
    if beam_size < 1 or length_penalty < 0:
        raise ValueError(f"need beam_size >= 1 and length_penalty >= 0; got {beam_size}, "
                         f"{length_penalty}")
    batch, device, beam = src_ids.shape[0], src_ids.device, beam_size
    if batch == 0:
        return SearchResult([], [], [], [], [])
    alpha, neg_inf = length_penalty, float("-inf")
    src_lens = src_lengths.tolist()
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    with eval_mode(model):
        state = model.init_state(model.encode(src_ids, src_mask, src_lengths))
        state = model.reorder_state(state, tile_index(batch, beam, device))  # rows = batch*beam
        max_lens = _prefix_budget(output_budget(src_lengths.to(device), max_len_ratio, max_len_offset),
                                  prefix)  # (batch,)
        active = torch.arange(batch, device=device)  # sentence ids still searched: (n,)
        beam_scores = torch.zeros(batch, beam, device=device)  # (n, beam) sum of log-probs
        beam_scores[:, 1:] = neg_inf  # all beams start equal: expand only the first
        n_finished = torch.zeros(batch, dtype=torch.long, device=device)  # (n,)
        best_finished = torch.full((batch,), neg_inf, device=device)  # (n,)
        prev_ids = torch.full((batch * beam,), bos_id, dtype=torch.long, device=device)
        history = prev_ids.new_zeros(batch * beam, 0)  # (rows, t) tokens so far
        logp_history = beam_scores.new_zeros(batch * beam, 0)  # (rows, t) their log-probs
        attn_history = None  # (rows, t, src_len)
        for t in range(int(max_lens.max())):
            logits, state, attn = model.decode_step(prev_ids, state)
            attn = attn.unsqueeze(1)  # (rows, 1, src_len)
            attn_history = attn if attn_history is None else torch.cat([attn_history, attn], 1)
            logp = _force_prefix(_log_softmax(logits), prefix, active.repeat_interleave(beam), t)  # (rows, vocab)
            n, vocab = active.shape[0], logp.shape[-1]
            candidates = (beam_scores.view(-1, 1) + logp).view(n, beam * vocab)
            # the 2*beam best extensions per sentence, sorted: (n, 2*beam)
            top_scores, top_index = candidates.topk(min(2 * beam, beam * vocab), dim=1)
            top_rows = top_index // vocab + torch.arange(n, device=device).unsqueeze(1) * beam
            top_tokens = top_index % vocab
            top_logps = logp.view(n, beam * vocab).gather(1, top_index)  # (n, 2*beam) the new tokens' log-probs
            is_eos = top_tokens == eos_id
            at_max = t + 1 >= max_lens[active]  # (n,)
            lp = gnmt_penalty(t + 1, alpha)  # every candidate has t+1 tokens
            in_beam = torch.arange(top_scores.shape[1], device=device) < beam
            finalize = (is_eos | at_max.unsqueeze(1)) & in_beam & top_scores.isfinite()
            live_scores, live_pos = top_scores.masked_fill(is_eos, neg_inf).topk(beam, dim=1)
            n_finished += finalize.sum(dim=1)
            best_finished = torch.maximum(
                best_finished, torch.where(finalize, top_scores / lp, neg_inf).max(dim=1).values)
            done = at_max | ((n_finished >= beam) & (best_finished >= live_scores[:, 0] / lp))

            sent_idx, cand_idx = finalize.nonzero(as_tuple=True)  # host sync
            if sent_idx.numel():
                rows = top_rows[sent_idx, cand_idx]
                step_logps = torch.cat([logp_history[rows], top_logps[sent_idx, cand_idx].unsqueeze(1)], 1)
                _collect(finished, active[sent_idx].tolist(), history[rows].tolist(),
                         top_tokens[sent_idx, cand_idx].tolist(), top_scores[sent_idx, cand_idx].tolist(),
                         step_logps.tolist(), attn_history[rows].cpu(), src_lens, eos_id, lp)

            keep = done.logical_not().nonzero().squeeze(1)  # (n_keep,) host sync
            if keep.numel() == 0:
                break
            live_rows = top_rows.gather(1, live_pos)[keep].view(-1)  # (n_keep*beam,)
            live_tokens = top_tokens.gather(1, live_pos)[keep].view(-1)  # (n_keep*beam,)
            # the same sentences: hypotheses move within them, the source side stays in place
            state = model.reorder_state(state, live_rows, within_sentences=keep.numel() == n)
            history = torch.cat([history[live_rows], live_tokens.unsqueeze(1)], 1)  # (rows, t+1)
            live_logps = top_logps.gather(1, live_pos)[keep].view(-1, 1)  # (n_keep*beam, 1)
            logp_history = torch.cat([logp_history[live_rows], live_logps], 1)  # (rows, t+1)
            attn_history = attn_history[live_rows]
            beam_scores, prev_ids = live_scores[keep], live_tokens
            active, n_finished, best_finished = active[keep], n_finished[keep], best_finished[keep]
    nbest = [sorted(hyps, key=lambda h: h.score, reverse=True)[:beam] for hyps in finished]
    return SearchResult.from_nbest(nbest)


def _collect(finished: list[list[Hypothesis]], sentences: list[int], histories: list[list[int]],
             last_tokens: list[int], log_probs: list[float], step_logps: list[list[float]], attention: Tensor,
             src_lens: list[int], eos_id: int, lp: float) -> None:
    """Append m finished hypotheses to their sentences' lists; step_logps are (m, t+1) lists, attention
    is (m, t+1, src_len)."""
    for i, (sent, prefix, last, logp) in enumerate(
            zip(sentences, histories, last_tokens, log_probs)):
        tokens = prefix if last == eos_id else prefix + [last]
        attn = attention[i, :, :src_lens[sent]]  # (t+1, src_length)
        finished[sent].append(Hypothesis(tokens, logp / lp, logp, attn, step_logps[i]))


def random_models():
    """Untrained toy models of both families (their outputs end at random lengths), and a bigram."""
    torch.manual_seed(0)
    transformer = TransformerSeq2Seq(VOCAB, VOCAB, d_model=16, heads=4, ff_dim=32, enc_layers=1,
                                     dec_layers=2, dropout=0.0)
    rnn = RNNSeq2Seq(VOCAB, VOCAB, emb_dim=8, enc_hidden=8, dec_hidden=16, attn_dim=8, dropout=0.0)
    return {"transformer": transformer.eval(), "rnn": rnn.eval(), "bigram": random_bigram(1, vocab=VOCAB)}


def assert_same(got: SearchResult, expected: SearchResult) -> None:
    """Every field equal, exactly: the same arithmetic on the same numbers."""
    assert len(got.nbest) == len(expected.nbest)
    for hyps, ref in zip(got.nbest, expected.nbest):
        assert [h.tokens for h in hyps] == [h.tokens for h in ref]
        assert [h.score for h in hyps] == [h.score for h in ref]
        assert [h.log_prob for h in hyps] == [h.log_prob for h in ref]
        assert [h.token_log_probs for h in hyps] == [h.token_log_probs for h in ref]
        for h, r in zip(hyps, ref):
            assert h.attention.dtype == r.attention.dtype
            torch.testing.assert_close(h.attention, r.attention, rtol=0, atol=0)
    assert got.tokens == expected.tokens and got.scores == expected.scores


MODELS = random_models()


@pytest.mark.parametrize("name", ["transformer", "rnn", "bigram"])
@pytest.mark.parametrize("beam,alpha", [(1, 0.0), (2, 1.0), (3, 0.0), (5, 0.6), (5, 3.0)])
def test_trail_equals_the_copying_search(name, beam, alpha):
    model = MODELS[name]
    gen = torch.Generator().manual_seed(beam)
    lengths = torch.tensor([1, 6, 3, 2, 7, 4])
    src_mask = torch.arange(8) < lengths[:, None]  # (batch, src_len): one extra padding column
    src_ids = torch.randint(4, VOCAB, src_mask.shape, generator=gen).masked_fill(src_mask.logical_not(), 0)
    args = dict(beam_size=beam, length_penalty=alpha, max_len_ratio=1.5, max_len_offset=2)
    assert_same(beam_search(model, src_ids, src_mask, lengths, **args),
                reference_beam_search(model, src_ids, src_mask, lengths, **args))


@pytest.mark.parametrize("name", ["transformer", "rnn"])
def test_trail_equals_the_copying_search_with_prefixes(name):
    model = MODELS[name]
    src_ids, src_mask, lengths = source([3, 1, 5])
    prefix = torch.tensor([[4, 5, 6], [7, -1, -1], [-1, -1, -1]])  # (batch, prefix_len)
    args = dict(beam_size=3, length_penalty=1.0, max_len_ratio=1.0, max_len_offset=2, prefix=prefix)
    assert_same(beam_search(model, src_ids, src_mask, lengths, **args),
                reference_beam_search(model, src_ids, src_mask, lengths, **args))


def test_trail_equals_the_copying_search_when_no_sentence_ends_early():
    """Eos never wins: every hypothesis runs to its sentence's budget, all finishing at once."""
    model = random_bigram(2, vocab=VOCAB)
    model.log_probs[:, EOS] = -1e9
    args = dict(beam_size=4, length_penalty=0.0, max_len_ratio=2.0, max_len_offset=1)
    src = source([1, 4, 2])
    assert_same(beam_search(model, *src, **args), reference_beam_search(model, *src, **args))
