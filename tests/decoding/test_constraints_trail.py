"""Constrained beam search on the step records (decoding.hypotheses.BeamTrail) gives the outputs of the
search it replaced.

The reference below is attnmt.decoding.constraints.constrained_beam_search as it stood before (commit
076cc84): it copied every hypothesis' token, log-prob and attention history at every step. It is
kept here, verbatim but for its docstring, only as the reference that the new search must equal
bit for bit: tokens, scores, log-probs, token log-probs, attention, n-best.
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from attnmt.decoding.constraints import (GREEDY_BEAM, ConstraintBatch, _advance, _allocation_order, _candidates,
                                         _rewarded_lengths, constrained_beam_search, constraint_batch, suffix_matches)
from attnmt.decoding.hypotheses import Hypothesis, SearchResult
# the reference below is kept verbatim: the search pieces under the private names it was written with
from attnmt.decoding.search import check_search_args as _check_args
from attnmt.decoding.search import force_prefix as _force_prefix
from attnmt.decoding.search import gnmt_penalty, output_budget, tile_index
from attnmt.decoding.search import log_softmax as _log_softmax
from attnmt.decoding.search import prefix_budget as _prefix_budget
from attnmt.models import eval_mode

from test_beam_trail import MODELS, assert_same
from test_search import source


@torch.inference_mode()
def reference_constrained_search(model: nn.Module, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor,
                            constraints: ConstraintBatch, *, beam_size: int = 5, length_penalty: float = 1.0,
                            max_len_ratio: float = 2.0, max_len_offset: int = 10, bos_id: int = 2, eos_id: int = 3,
                            prefix: Tensor | None = None) -> SearchResult:
    """constraints.constrained_beam_search of commit 076cc84, kept verbatim as the reference."""
    _check_args(src_ids, src_mask, src_lengths, max_len_ratio, max_len_offset)
    if beam_size < 1 or length_penalty < 0:
        raise ValueError(f"constrained search needs beam_size >= 1 and length_penalty >= 0; got {beam_size}, "
                         f"{length_penalty}")
    batch, device, beam = src_ids.shape[0], src_ids.device, max(beam_size, GREEDY_BEAM)
    if constraints.tokens.shape[0] != batch or constraints.lengths.shape != constraints.tokens.shape[:2]:
        raise ValueError(f"expected constraints (batch={batch}, cons, cons_len) and (batch, cons); got "
                         f"{tuple(constraints.tokens.shape)}, {tuple(constraints.lengths.shape)}")
    if batch == 0:
        return SearchResult([], [], [], [], [])
    alpha, neg_inf = length_penalty, float("-inf")
    cons_tokens, cons_lengths = constraints.tokens.to(device), constraints.lengths.to(device)
    cons_total = cons_lengths.sum(dim=1)  # (batch,) constraint tokens per sentence
    num_banks = int(cons_total.max()) + 1
    src_lens = src_lengths.tolist()
    finished: list[list[tuple[int, Hypothesis]]] = [[] for _ in range(batch)]  # (tokens met, hypothesis)
    rewarded = _rewarded_lengths(model, src_ids, src_mask, src_lengths, cons_total, beam=beam, alpha=alpha,
                                 max_len_ratio=max_len_ratio, max_len_offset=max_len_offset, bos_id=bos_id,
                                 eos_id=eos_id, prefix=prefix)  # (batch,)
    with eval_mode(model):
        state = model.init_state(model.encode(src_ids, src_mask, src_lengths))
        state = model.reorder_state(state, tile_index(batch, beam, device))  # rows = batch*beam
        max_lens = _prefix_budget(output_budget(src_lengths.to(device), max_len_ratio, max_len_offset), prefix)
        prefix_lens = (prefix >= 0).sum(dim=1) if prefix is not None else torch.zeros_like(max_lens)
        max_lens = torch.maximum(max_lens, prefix_lens + cons_total + 1)  # (batch,)
        active = torch.arange(batch, device=device)  # (n,)
        beam_scores = torch.zeros(batch, beam, device=device)  # (n, beam)
        beam_scores[:, 1:] = neg_inf
        met = torch.zeros(batch * beam, cons_tokens.shape[1], dtype=torch.bool, device=device)  # (rows, cons)
        n_finished = torch.zeros(batch, dtype=torch.long, device=device)  # (n,)
        best_finished = torch.full((batch,), neg_inf, device=device)  # (n,)
        prev_ids = torch.full((batch * beam,), bos_id, dtype=torch.long, device=device)
        history = prev_ids.new_zeros(batch * beam, 0)  # (rows, t)
        logp_history = beam_scores.new_zeros(batch * beam, 0)  # (rows, t) the tokens' log-probs
        attn_history = None  # (rows, t, src_len)
        for t in range(int(max_lens.max())):
            logits, state, attn = model.decode_step(prev_ids, state)
            attn = attn.unsqueeze(1)  # (rows, 1, src_len)
            attn_history = attn if attn_history is None else torch.cat([attn_history, attn], 1)
            row_sents = active.repeat_interleave(beam)  # (rows,)
            logp = _log_softmax(logits)  # (rows, vocab)
            n, vocab = active.shape[0], logp.shape[-1]
            tok, lens = cons_tokens[row_sents], cons_lengths[row_sents]  # (rows, cons, cons_len), (rows, cons)
            ends = suffix_matches(history, tok, lens)  # (rows, cons, cons_len + 1)
            last = (lens - 1).clamp(min=0)  # (rows, cons)
            # a met constraint may not be completed again; eos waits until all are met
            again = met & ends.gather(2, last.unsqueeze(2)).squeeze(2)  # (rows, cons)
            last_tok = tok.gather(2, last.unsqueeze(2)).squeeze(2).clamp(min=0)  # (rows, cons)
            logp = logp.scatter_add(1, last_tok, torch.where(again, neg_inf, 0.0).to(logp.dtype))
            all_met = (met | (lens == 0)).all(dim=1)  # (rows,)
            logp[:, eos_id] = torch.where(all_met, logp[:, eos_id], neg_inf)
            logp = _force_prefix(logp, prefix, row_sents, t)  # a prefix wins over the rules above
            candidates = (beam_scores.view(-1, 1) + logp).view(n, beam * vocab)
            flat, scores = _candidates(candidates, logp, ends, tok, met.logical_not() & (lens > 0), beam)
            cand_rows = (flat // vocab + torch.arange(n, device=device).unsqueeze(1) * beam).view(-1)  # (n*cand,)
            cand_tokens = flat % vocab  # (n, cand)
            completes, cand_progress = _advance(ends[cand_rows], tok[cand_rows], lens[cand_rows],
                                                cand_tokens.view(-1))
            cand_met = met[cand_rows] | completes  # (n*cand, cons)
            met_tokens = torch.where(cand_met, lens[cand_rows], 0).sum(dim=1)
            partial = torch.where(cand_met, 0, cand_progress).max(dim=1).values
            banks = (met_tokens + partial).view(n, -1)  # (n, cand)
            order = _allocation_order(scores, banks, num_banks)  # (n, cand)
            ranked_scores, ranked_tokens = scores.gather(1, order), cand_tokens.gather(1, order)
            ranked_logps = logp.view(n, beam * vocab).gather(1, flat).gather(1, order)  # (n, cand) their log-probs
            ranked_flat = order + torch.arange(n, device=device).unsqueeze(1) * order.shape[1]  # into n*cand
            is_eos = ranked_tokens == eos_id
            at_max = t + 1 >= max_lens[active]  # (n,)
            lp = gnmt_penalty(rewarded[active].clamp(max=t + 1), alpha)  # (n,) every candidate has t+1 tokens
            in_beam = torch.arange(order.shape[1], device=device) < beam
            finalize = (is_eos | at_max.unsqueeze(1)) & in_beam & ranked_scores.isfinite()
            # the first beam non-eos candidates in allocation order stay live
            live_key = torch.where(is_eos, 1, 0) * order.shape[1] + torch.arange(order.shape[1], device=device)
            live_pos = live_key.argsort(dim=1)[:, :beam]  # (n, beam)
            live_scores = ranked_scores.gather(1, live_pos)
            n_finished += finalize.sum(dim=1)
            best_finished = torch.maximum(
                best_finished, torch.where(finalize, ranked_scores / lp.unsqueeze(1), neg_inf).max(dim=1).values)
            done = at_max | ((n_finished >= beam) & (best_finished >= live_scores.max(dim=1).values / lp))

            sent_idx, cand_idx = finalize.nonzero(as_tuple=True)  # host sync
            if sent_idx.numel():
                picked = ranked_flat[sent_idx, cand_idx]  # into n*cand
                rows = cand_rows[picked]
                sentences = active[sent_idx].tolist()
                step_logps = torch.cat([logp_history[rows], ranked_logps[sent_idx, cand_idx].unsqueeze(1)], 1)
                for i, (sent, past, token, logp_sum, met_count, steps, penalty) in enumerate(zip(
                        sentences, history[rows].tolist(), ranked_tokens[sent_idx, cand_idx].tolist(),
                        ranked_scores[sent_idx, cand_idx].tolist(), met_tokens[picked].tolist(),
                        step_logps.tolist(), lp[sent_idx].tolist())):
                    tokens = past if token == eos_id else past + [token]
                    attention = attn_history[rows[i], :, :src_lens[sent]].cpu()  # (t+1, src_length)
                    hypothesis = Hypothesis(tokens, logp_sum / penalty, logp_sum, attention, steps)
                    finished[sent].append((met_count, hypothesis))

            keep = done.logical_not().nonzero().squeeze(1)  # (n_keep,) host sync
            if keep.numel() == 0:
                break
            live = ranked_flat.gather(1, live_pos)[keep].view(-1)  # (n_keep*beam,) into n*cand
            live_rows, live_tokens = cand_rows[live], cand_tokens.view(-1)[live]
            state = model.reorder_state(state, live_rows, within_sentences=keep.numel() == n)
            history = torch.cat([history[live_rows], live_tokens.unsqueeze(1)], 1)  # (rows, t+1)
            live_logps = ranked_logps.gather(1, live_pos)[keep].view(-1, 1)  # (n_keep*beam, 1)
            logp_history = torch.cat([logp_history[live_rows], live_logps], 1)  # (rows, t+1)
            attn_history = attn_history[live_rows]
            met = cand_met[live]
            beam_scores, prev_ids = live_scores[keep], live_tokens
            active, n_finished, best_finished = active[keep], n_finished[keep], best_finished[keep]
    nbest = [[h for _, h in sorted(hyps, key=lambda mh: (mh[0], mh[1].score), reverse=True)[:beam_size]]
             for hyps in finished]
    return SearchResult.from_nbest(nbest)



CONSTRAINTS = [[[5, 6]], [], [[7], [4, 4, 5]], [[8]]]


@pytest.mark.parametrize("name", ["transformer", "rnn", "bigram"])
@pytest.mark.parametrize("beam,alpha", [(1, 0.0), (3, 1.0), (4, 3.0)])
def test_constrained_trail_equals_the_copying_search(name, beam, alpha):
    model = MODELS[name]
    src = source([3, 1, 5, 2])
    args = dict(beam_size=beam, length_penalty=alpha, max_len_ratio=1.5, max_len_offset=3)
    assert_same(constrained_beam_search(model, *src, constraint_batch(CONSTRAINTS), **args),
                reference_constrained_search(model, *src, constraint_batch(CONSTRAINTS), **args))


@pytest.mark.parametrize("name", ["transformer", "rnn"])
def test_constrained_trail_equals_the_copying_search_with_prefixes(name):
    src = source([3, 1, 5, 2])
    prefix = torch.tensor([[4, 5], [-1, -1], [7, -1], [-1, -1]])  # (batch, prefix_len)
    args = dict(beam_size=3, length_penalty=1.0, max_len_ratio=1.0, max_len_offset=2, prefix=prefix)
    assert_same(constrained_beam_search(MODELS[name], *src, constraint_batch(CONSTRAINTS), **args),
                reference_constrained_search(MODELS[name], *src, constraint_batch(CONSTRAINTS), **args))
