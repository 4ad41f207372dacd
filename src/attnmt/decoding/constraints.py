"""Lexically constrained beam search with dynamic beam allocation (Post & Vilar 2018; Hu et al. 2019),
batched over sentences: every constraint (a target token sequence) appears in the output exactly once.

Shapes:
    batch: sentences; beam: hypotheses kept per sentence; n: sentences still searched; rows = n * beam.
    cons: constraints per sentence (padded); cons_len: tokens per constraint (padded).
    cand: candidate extensions per sentence; banks: constraint tokens met + 1.
    src_len, vocab, t as in search.py.

How it works, per step (suffix tracking, banks shared round robin, the length-aware scores, greedy
with an internal beam): docs/decoding.md.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
from torch import Tensor, nn

from attnmt.decoding.hypotheses import BeamTrail, SearchResult
from attnmt.decoding.search import (beam_search, check_search_args, force_prefix, gnmt_penalty, log_softmax,
                                    sentence_budgets, tile_index)
from attnmt.models import eval_mode

__all__ = ["GREEDY_BEAM", "ConstraintBatch", "constraint_batch", "constrained_beam_search", "count_occurrences"]

GREEDY_BEAM = 2  # the internal beam of a constrained search asked for beam_size 1 (module docstring)


class ConstraintBatch(NamedTuple):
    """The constraints of a batch of sentences, padded."""

    tokens: Tensor   # (batch, cons, cons_len) long, -1 = padding
    lengths: Tensor  # (batch, cons) long, 0 = no constraint


def constraint_batch(constraints: Sequence[Sequence[Sequence[int]]], device: torch.device | str = "cpu"
                     ) -> ConstraintBatch:
    """Per sentence, a list of constraints (token id lists) -> one padded ConstraintBatch.

    Raises:
        ValueError: an empty constraint.
    """
    if any(len(c) == 0 for cons in constraints for c in cons):
        raise ValueError("a constraint needs at least one token")
    width = max((len(cons) for cons in constraints), default=0)
    depth = max((len(c) for cons in constraints for c in cons), default=0)
    tokens = torch.full((len(constraints), max(width, 1), max(depth, 1)), -1, dtype=torch.long)
    lengths = torch.zeros(len(constraints), max(width, 1), dtype=torch.long)
    for i, cons in enumerate(constraints):
        for j, c in enumerate(cons):
            tokens[i, j, :len(c)] = torch.tensor(list(c), dtype=torch.long)
            lengths[i, j] = len(c)
    return ConstraintBatch(tokens.to(device), lengths.to(device))


def count_occurrences(tokens: Sequence[int], phrase: Sequence[int]) -> int:
    """How many times `phrase` occurs in `tokens` as a contiguous run (overlaps counted)."""
    n = len(phrase)
    return sum(1 for i in range(len(tokens) - n + 1) if list(tokens[i:i + n]) == list(phrase)) if n else 0


def suffix_matches(history: Tensor, cons_tokens: Tensor, cons_lengths: Tensor) -> Tensor:
    """Whether each row's history ends with each constraint's first k tokens, k = 0 .. cons_len.

    history: (rows, t); cons_tokens: (rows, cons, cons_len); cons_lengths: (rows, cons).
    Returns: (rows, cons, cons_len + 1) bool; k = 0 is always True, k > a constraint's length False.
    """
    rows, cons, depth = cons_tokens.shape
    t = history.shape[1]
    ends = torch.zeros(rows, cons, depth + 1, dtype=torch.bool, device=history.device)
    ends[:, :, 0] = True
    for k in range(1, min(depth, t) + 1):  # a loop over phrase lengths, not over the batch
        tail = history[:, t - k:].unsqueeze(1)  # (rows, 1, k)
        ends[:, :, k] = (tail == cons_tokens[:, :, :k]).all(dim=2) & (k <= cons_lengths)
    return ends


def _advance(ends: Tensor, cons_tokens: Tensor, cons_lengths: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor]:
    """What appending `tokens` does to each constraint: (completes, progress after).

    ends: (m, cons, cons_len + 1) suffix_matches before; cons_tokens: (m, cons, cons_len); tokens: (m,).
    Returns: completes (m, cons) bool; progress (m, cons) long, the longest prefix (shorter than
    the constraint) that ends the new history.
    """
    depth = cons_tokens.shape[2]
    extends = ends[:, :, :depth] & (cons_tokens == tokens.view(-1, 1, 1))  # (m, cons, cons_len): k -> k + 1
    k_next = torch.arange(1, depth + 1, device=tokens.device)  # (cons_len,)
    completes = extends.gather(2, (cons_lengths - 1).clamp(min=0).unsqueeze(2)).squeeze(2) & (cons_lengths > 0)
    partial = extends & (k_next < cons_lengths.unsqueeze(2))
    progress = torch.where(partial, k_next, 0).max(dim=2).values  # (m, cons)
    return completes, progress


def _candidates(candidates: Tensor, logp: Tensor, ends: Tensor, cons_tokens: Tensor, unmet: Tensor, beam: int
                ) -> tuple[Tensor, Tensor]:
    """Each sentence's candidate extensions: its 2*beam best, each row's best token, and each row's
    next token of every unmet constraint; an extension proposed twice counts once.

    candidates: (n, beam*vocab) scores of every extension; logp: (rows, vocab); ends: (rows, cons,
    cons_len + 1) suffix_matches; cons_tokens: (rows, cons, cons_len); unmet: (rows, cons) bool.
    Returns: flat (n, cand) indices into beam*vocab (beam position * vocab + token), and their
    scores (n, cand), -inf for the repeats and for the constraints already met.
    """
    n, vocab, depth = candidates.shape[0], logp.shape[1], cons_tokens.shape[2]
    device = candidates.device
    top_index = candidates.topk(min(2 * beam, beam * vocab), dim=1).indices  # (n, 2*beam)
    row_best = logp.argmax(dim=1).view(n, beam) + torch.arange(beam, device=device) * vocab  # (n, beam)
    progress = torch.where(ends[:, :, :depth], torch.arange(depth, device=device), 0).max(dim=2).values
    next_tok = cons_tokens.gather(2, progress.clamp(max=depth - 1).unsqueeze(2)).squeeze(2)  # (rows, cons)
    row_offset = (torch.arange(n * beam, device=device) % beam * vocab).unsqueeze(1)  # (rows, 1)
    next_index = (next_tok.clamp(min=0) + row_offset).view(n, -1)  # (n, beam*cons)
    flat = torch.cat([top_index, row_best, next_index], dim=1)  # (n, cand)
    scores = candidates.gather(1, flat)
    wanted = torch.cat([torch.ones_like(flat[:, :top_index.shape[1] + beam], dtype=torch.bool),
                        unmet.view(n, -1)], dim=1)  # (n, cand)
    scores = scores.masked_fill(wanted.logical_not(), float("-inf"))
    # the copy kept of a repeated extension is a finite one where there is one
    sorted_key, order = (flat * 2 + scores.isinf().long()).sort(dim=1)
    sorted_flat = sorted_key // 2
    repeat = torch.cat([torch.zeros_like(sorted_flat[:, :1], dtype=torch.bool),
                        sorted_flat[:, 1:] == sorted_flat[:, :-1]], dim=1)
    return flat, scores.masked_fill(torch.zeros_like(repeat).scatter_(1, order, repeat), float("-inf"))


def _allocation_order(scores: Tensor, banks: Tensor, num_banks: int) -> Tensor:
    """Round-robin order over banks (highest first) of each sentence's candidates, best first
    within a bank; candidates with score -inf last. scores, banks: (n, cand) -> (n, cand) positions."""
    by_score = scores.argsort(dim=1, descending=True, stable=True)  # (n, cand)
    sorted_banks = banks.gather(1, by_score)
    onehot = torch.nn.functional.one_hot(sorted_banks, num_banks)  # (n, cand, banks)
    rank_sorted = (onehot.cumsum(dim=1) * onehot).sum(dim=2) - 1  # rank within its bank, in score order
    rank = torch.empty_like(rank_sorted).scatter_(1, by_score, rank_sorted)  # (n, cand)
    key = rank * num_banks + (num_banks - 1 - banks)
    key = torch.where(scores.isfinite(), key, torch.iinfo(torch.long).max)
    return key.argsort(dim=1, stable=True)


def _rewarded_lengths(model: nn.Module, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor, cons_total: Tensor,
                      *, beam: int, alpha: float, **search) -> Tensor:
    """(batch,) the longest length (eos included) the length penalty rewards: the plain beam
    search's best length plus the sentence's constraint tokens (module docstring); with alpha = 0
    (no reward) the search is not run and the lengths are unbounded."""
    if alpha == 0:
        return torch.full_like(cons_total, torch.iinfo(torch.long).max)
    plain = beam_search(model, src_ids, src_mask, src_lengths, beam_size=beam, length_penalty=alpha, **search)
    plain_lengths = [h.attention.shape[0] for h in (hyps[0] for hyps in plain.nbest)]  # tokens + eos if produced
    return torch.tensor(plain_lengths, device=cons_total.device) + cons_total


@torch.inference_mode()
def constrained_beam_search(model: nn.Module, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor,
                            constraints: ConstraintBatch, *, beam_size: int = 5, length_penalty: float = 1.0,
                            max_len_ratio: float = 2.0, max_len_offset: int = 10, bos_id: int = 2, eos_id: int = 3,
                            prefix: Tensor | None = None, suppress: Sequence[int] = (),
                            budget_lengths: Tensor | None = None) -> SearchResult:
    """Beam search in which every sentence's constraints appear in its output exactly once (module
    docstring), for all sentences at once.

    Args:
        model: encoder-decoder with the search interface (search.py).
        src_ids: (batch, src_len) long. src_mask: (batch, src_len) bool. src_lengths: (batch,).
        constraints: ConstraintBatch of (batch, cons, cons_len) tokens and (batch, cons) lengths.
        beam_size: hypotheses kept per sentence and returned; 1 (greedy) searches with GREEDY_BEAM
            (one hypothesis cannot be in two banks) and returns the best.
        length_penalty, max_len_ratio, max_len_offset, bos_id, eos_id, prefix, suppress, budget_lengths: as
            search.beam_search;
            each budget is raised to at least the sentence's constraint tokens (+ prefix) + 1; the
            penalty's length is capped (module docstring: length-aware scores).

    Returns:
        SearchResult whose n-best lists rank hypotheses meeting more constraints first, then by
        score: log_prob / gnmt_penalty(min(length, rewarded length), alpha).

    Raises:
        ValueError: bad shapes, beam_size < 1 or length_penalty < 0.
    """
    check_search_args(src_ids, src_mask, src_lengths, max_len_ratio, max_len_offset, budget_lengths)
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
    trail = BeamTrail()  # attention, log-probs and back-pointers per step (hypotheses.py)
    window = max(int(cons_tokens.shape[2]), 1)  # the history suffix_matches reads: the longest constraint
    rewarded = _rewarded_lengths(model, src_ids, src_mask, src_lengths, cons_total, beam=beam, alpha=alpha,
                                 max_len_ratio=max_len_ratio, max_len_offset=max_len_offset, bos_id=bos_id,
                                 eos_id=eos_id, prefix=prefix, suppress=suppress,
                                 budget_lengths=budget_lengths)  # (batch,)
    with eval_mode(model):
        state = model.init_state(model.encode(src_ids, src_mask, src_lengths))
        state = model.reorder_state(state, tile_index(batch, beam, device))  # rows = batch*beam
        max_lens = sentence_budgets(src_lengths, budget_lengths, max_len_ratio, max_len_offset, prefix, device)
        prefix_lens = (prefix >= 0).sum(dim=1) if prefix is not None else torch.zeros_like(max_lens)
        max_lens = torch.maximum(max_lens, prefix_lens + cons_total + 1)  # (batch,)
        active = torch.arange(batch, device=device)  # (n,)
        beam_scores = torch.zeros(batch, beam, device=device)  # (n, beam)
        beam_scores[:, 1:] = neg_inf
        met = torch.zeros(batch * beam, cons_tokens.shape[1], dtype=torch.bool, device=device)  # (rows, cons)
        n_finished = torch.zeros(batch, dtype=torch.long, device=device)  # (n,)
        best_finished = torch.full((batch,), neg_inf, device=device)  # (n,)
        prev_ids = torch.full((batch * beam,), bos_id, dtype=torch.long, device=device)
        history = prev_ids.new_zeros(batch * beam, 0)  # (rows, min(t, window)) the last tokens
        for t in range(int(max_lens.max())):
            logits, state, attn = model.decode_step(prev_ids, state)  # attn: (rows, src_len)
            row_sents = active.repeat_interleave(beam)  # (rows,)
            logp = log_softmax(logits, suppress)  # (rows, vocab)
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
            logp = force_prefix(logp, prefix, row_sents, t)  # a prefix wins over the rules above
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

            trail.finish(attn, finalize, active.unsqueeze(1), cand_rows[ranked_flat], ranked_tokens, ranked_scores,
                         ranked_logps, lp.unsqueeze(1), met_tokens[ranked_flat])

            keep = done.logical_not().nonzero().squeeze(1)  # (n_keep,) host sync
            if keep.numel() == 0:
                break
            live = ranked_flat.gather(1, live_pos)[keep].view(-1)  # (n_keep*beam,) into n*cand
            live_rows, live_tokens = cand_rows[live], cand_tokens.view(-1)[live]
            trail.extend(live_rows, live_tokens, ranked_logps.gather(1, live_pos)[keep].view(-1))
            state = model.reorder_state(state, live_rows, within_sentences=keep.numel() == n)
            history = torch.cat([history[live_rows], live_tokens.unsqueeze(1)], 1)[:, -window:]  # (rows, <= window)
            met = cand_met[live]
            beam_scores, prev_ids = live_scores[keep], live_tokens
            active, n_finished, best_finished = active[keep], n_finished[keep], best_finished[keep]
    nbest = trail.nbest(batch, beam_size, src_lengths.tolist(), eos_id, key=lambda e: (e.met, e.score))
    return SearchResult.from_nbest(nbest)
