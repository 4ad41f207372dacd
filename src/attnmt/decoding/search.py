"""Batched greedy, beam and sampling search for any model with the encode / decode_step interface;
what they return is in hypotheses.py.

Shapes:
    batch: sentences; beam: hypotheses kept per sentence.
    n: sentences still searched (beam search drops finished ones); rows = n * beam.
    src_len: source positions (padded); t: steps decoded so far.
    vocab: target vocabulary size.

The model interface, and the conventions every search keeps (budgets, tokens, attention rows,
prefixes, suppressed ids): docs/decoding.md.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn

from attnmt.decoding.hypotheses import BeamTrail, Hypothesis, SearchResult
from attnmt.models import eval_mode

__all__ = ["greedy_search", "beam_search", "sample_search", "gnmt_penalty", "tile_index", "output_budget",
           "sentence_budgets", "check_search_args", "prefix_budget", "force_prefix", "log_softmax"]



def gnmt_penalty(length: int, alpha: float) -> float:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al. 2016, eq. 14); alpha=0 -> 1."""
    return ((5.0 + length) / 6.0) ** alpha


def tile_index(batch: int, beam: int, device: torch.device | str | None = None) -> Tensor:
    """Row index that repeats each sentence beam times: (batch * beam,) = [0]*beam + [1]*beam ..."""
    return torch.arange(batch, device=device).repeat_interleave(beam)


def check_search_args(src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor, max_len_ratio: float,
                max_len_offset: int, budget_lengths: Tensor | None = None) -> None:
    shapes = src_ids.shape, src_mask.shape, src_lengths.shape
    if src_ids.dim() != 2 or shapes[1] != shapes[0] or shapes[2] != shapes[0][:1]:
        raise ValueError(f"expected src_ids, src_mask (batch, src_len) and src_lengths (batch,); "
                         f"got {', '.join(str(tuple(shape)) for shape in shapes)}")
    if budget_lengths is not None and budget_lengths.shape != src_lengths.shape:
        raise ValueError(f"expected budget_lengths (batch={shapes[0][0]},); got {tuple(budget_lengths.shape)}")
    if max_len_ratio < 0 or max_len_offset < 0:
        raise ValueError(f"max_len_ratio and max_len_offset must be >= 0; got {max_len_ratio}, "
                         f"{max_len_offset}")


def output_budget(src_lengths: Tensor, ratio: float, offset: int) -> Tensor:
    """Per-sentence output budget, eos included: (batch,) source lengths -> (batch,) long, at least 1."""
    return (src_lengths.double() * ratio + offset).floor().long().clamp(min=1)


def sentence_budgets(src_lengths: Tensor, budget_lengths: Tensor | None, ratio: float, offset: int,
                     prefix: Tensor | None, device: torch.device) -> Tensor:
    """(batch,) each sentence's output budget on `device`: output_budget of its `budget_lengths`
    (default: its source tokens), raised to its prefix length + 1 (prefix_budget)."""
    lengths = src_lengths if budget_lengths is None else budget_lengths
    return prefix_budget(output_budget(lengths.to(device), ratio, offset), prefix)


def prefix_budget(budgets: Tensor, prefix: Tensor | None) -> Tensor:
    """(batch,) budgets raised to each sentence's prefix length + 1 (room for its eos)."""
    if prefix is None:
        return budgets
    if prefix.dim() != 2 or prefix.shape[0] != budgets.shape[0]:
        raise ValueError(f"expected prefix (batch={budgets.shape[0]}, prefix_len); got {tuple(prefix.shape)}")
    return torch.maximum(budgets, (prefix >= 0).sum(dim=1) + 1)


def force_prefix(logp: Tensor, prefix: Tensor | None, rows: Tensor, t: int) -> Tensor:
    """Rows whose sentence has a prefix token at step t may only emit it, at log-prob 0 (the
    others -inf); the other rows keep their log-probabilities.

    logp: (rows, vocab); prefix: (batch, prefix_len), -1 = free; rows: (rows,) the sentence of each row.
    """
    if prefix is None or t >= prefix.shape[1]:
        return logp
    forced = prefix[rows, t]  # (rows,)
    only = torch.full_like(logp, float("-inf")).scatter_(1, forced.clamp(min=0).unsqueeze(1), 0.0)
    return torch.where((forced >= 0).unsqueeze(1), only, logp)  # (rows, vocab)


def log_softmax(logits: Tensor, suppress: Sequence[int] = ()) -> Tensor:
    """Log-probabilities in at least float32 (half-precision logits are upcast); the `suppress`
    ids (tokens search never produces) are then set to -inf, the others not renormalized (as
    transformers' bad_words_ids do)."""
    logp = logits.to(torch.promote_types(logits.dtype, torch.float32)).log_softmax(dim=-1)
    if suppress:
        logp[:, list(suppress)] = float("-inf")
    return logp


@torch.inference_mode()
def greedy_search(model: nn.Module, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor, *,
                  max_len_ratio: float = 2.0, max_len_offset: int = 10, bos_id: int = 2,
                  eos_id: int = 3, check_every: int = 8, prefix: Tensor | None = None,
                  suppress: Sequence[int] = (), budget_lengths: Tensor | None = None) -> SearchResult:
    """Pick the most probable token at every step, for the whole batch at once.

    Every ``check_every`` steps the host reads how many sentences have ended (the loop's only
    host synchronisation, plus one before it, to size the outputs): the search stops when all
    have, and otherwise drops the finished ones from the batch (``model.reorder_state``), so
    that long sentences do not keep short ones' rows computed to the end. Between checks,
    finished rows are computed and their outputs ignored.

    Args:
        model: encoder-decoder with the search interface.
        src_ids: (batch, src_len) long. src_mask: (batch, src_len) bool. src_lengths: (batch,).
        max_len_ratio, max_len_offset: output budget per sentence (module docstring).
        budget_lengths: (batch,) the source lengths the budgets count (default src_lengths).
        bos_id, eos_id: special token ids.
        check_every: steps between checks that all sentences are finished.
        prefix: (batch, prefix_len) forced first tokens, -1 = none (module docstring).

    Returns:
        SearchResult; ``scores`` equal ``log_probs`` (no length penalty); n-best lists of one.

    Raises:
        ValueError: bad shapes, budget or check_every.
    """
    check_search_args(src_ids, src_mask, src_lengths, max_len_ratio, max_len_offset, budget_lengths)
    if check_every < 1:
        raise ValueError(f"check_every must be >= 1; got {check_every}")
    batch, device = src_ids.shape[0], src_ids.device
    if batch == 0:
        return SearchResult([], [], [], [], [])
    with eval_mode(model):
        state = model.init_state(model.encode(src_ids, src_mask, src_lengths))
        budgets = sentence_budgets(src_lengths, budget_lengths, max_len_ratio, max_len_offset, prefix,
                                   device)  # (batch,)
        steps = int(budgets.max())
        # outputs per sentence, written at the rows' sentences: (batch, steps), (batch, steps, src_len)
        tokens = torch.full((batch, steps), eos_id, dtype=torch.long, device=device)
        attention: Tensor | None = None  # allocated at the first step, in the model's dtypes
        log_probs: Tensor | None = None  # (batch,)
        step_logps: Tensor | None = None  # (batch, steps) each produced token's log-prob
        lengths = torch.zeros(batch, dtype=torch.long, device=device)  # (batch,)
        # the rows still decoded: their sentence, budget, previous token, and whether they ended
        rows = torch.arange(batch, device=device)  # (n,)
        row_budgets, prev_ids = budgets, torch.full((batch,), bos_id, dtype=torch.long, device=device)
        finished = torch.zeros(batch, dtype=torch.bool, device=device)  # (n,)
        for t in range(steps):
            logits, state, attn = model.decode_step(prev_ids, state)  # (n, vocab), (n, src_len)
            best_logp, prev_ids = force_prefix(log_softmax(logits, suppress), prefix, rows, t).max(dim=-1)  # (n,)
            if attention is None:
                attention = attn.new_zeros(batch, steps, attn.shape[-1])
                log_probs = best_logp.new_zeros(batch)
                step_logps = best_logp.new_zeros(batch, steps)
            alive = finished.logical_not()
            lengths.index_add_(0, rows, alive.long())
            log_probs.index_add_(0, rows, torch.where(alive, best_logp, 0.0))
            tokens[:, t].index_copy_(0, rows, prev_ids)
            step_logps[:, t].index_copy_(0, rows, best_logp)
            attention[:, t].index_copy_(0, rows, attn)
            finished |= (prev_ids == eos_id) | (t + 1 >= row_budgets)
            if (t + 1) % check_every == 0 and t + 1 < steps:
                n_finished = int(finished.sum())  # host sync
                if n_finished == finished.shape[0]:
                    break
                if n_finished:  # drop the finished rows: (n,) -> (n_keep,)
                    keep = finished.logical_not().nonzero().squeeze(1)
                    state = model.reorder_state(state, keep)
                    rows, row_budgets, prev_ids = rows[keep], row_budgets[keep], prev_ids[keep]
                    finished = finished[keep]
        token_rows = tokens.tolist()  # (batch, steps)
        attention = attention.cpu()  # (batch, steps, src_len)
    return _single_hypotheses(token_rows, lengths.tolist(), src_lengths.tolist(), log_probs.tolist(),
                              attention, step_logps.tolist(), eos_id)


def _single_hypotheses(token_rows: list[list[int]], lengths: list[int], src_lengths: list[int],
                       log_probs: list[float], attention: Tensor, step_logps: list[list[float]],
                       eos_id: int) -> SearchResult:
    """Greedy or sampled outputs, (batch, steps) rows of which each sentence's first `lengths`
    steps count, as a SearchResult of one hypothesis per sentence (score = log_prob)."""
    nbest = []
    for row, n, src_n, logp, attn, step in zip(token_rows, lengths, src_lengths, log_probs, attention, step_logps):
        out = row[:n - 1] if row[n - 1] == eos_id else row[:n]
        nbest.append([Hypothesis(out, logp, logp, attn[:n, :src_n], step[:n])])
    return SearchResult.from_nbest(nbest)


@torch.inference_mode()
def beam_search(model: nn.Module, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor, *,
                beam_size: int = 5, length_penalty: float = 1.0, max_len_ratio: float = 2.0,
                max_len_offset: int = 10, bos_id: int = 2, eos_id: int = 3,
                prefix: Tensor | None = None, suppress: Sequence[int] = (),
                budget_lengths: Tensor | None = None) -> SearchResult:
    """Beam search over all sentences at once (rows = active sentences x beam).

    Each step scores every hypothesis extension, ``topk`` over beam*vocab keeps 2*beam
    candidates per sentence; eos candidates ranked within the best ``beam`` are finished
    (as in fairseq), the best ``beam`` others stay live. Finished hypotheses are scored
    ``log_prob / lp`` with the GNMT penalty lp = ((5 + len) / 6)^alpha, alpha = ``length_penalty``
    (0 = plain sum of log-probs). A sentence leaves the active batch (its rows are dropped with
    ``model.reorder_state``) once it has ``beam_size`` finished hypotheses and the best of them
    scores at least as well as its best live hypothesis would, ended now (exact for alpha=0,
    since log-probs only fall; the usual heuristic for alpha>0), or at its length budget.
    ``beam_size=1`` gives exactly the greedy result.

    The search keeps no per-hypothesis history: each step records its rows' attention and the
    live hypotheses' tokens and back-pointers (``BeamTrail``), and only the hypotheses that make
    the n-best lists are traced back, once, after the loop (as fairseq and CTranslate2 do). The
    host reads, once per step, which sentences are done.

    Args:
        model: encoder-decoder with the search interface.
        src_ids: (batch, src_len) long. src_mask: (batch, src_len) bool. src_lengths: (batch,).
        beam_size: hypotheses kept per sentence; also the n-best list size.
        length_penalty: GNMT alpha >= 0.
        max_len_ratio, max_len_offset: output budget per sentence (module docstring).
        budget_lengths: (batch,) the source lengths the budgets count (default src_lengths).
        bos_id, eos_id: special token ids.
        prefix: (batch, prefix_len) forced first tokens, -1 = none (module docstring): while a
            sentence's prefix lasts, its beams have one extension, so it keeps one live hypothesis.

    Returns:
        SearchResult with n-best lists sorted by score, best first.

    Raises:
        ValueError: bad shapes, beam_size < 1 or length_penalty < 0.
    """
    check_search_args(src_ids, src_mask, src_lengths, max_len_ratio, max_len_offset, budget_lengths)
    if beam_size < 1 or length_penalty < 0:
        raise ValueError(f"need beam_size >= 1 and length_penalty >= 0; got {beam_size}, "
                         f"{length_penalty}")
    batch, device, beam = src_ids.shape[0], src_ids.device, beam_size
    if batch == 0:
        return SearchResult([], [], [], [], [])
    alpha, neg_inf = length_penalty, float("-inf")
    trail = BeamTrail()
    with eval_mode(model):
        state = model.init_state(model.encode(src_ids, src_mask, src_lengths))
        state = model.reorder_state(state, tile_index(batch, beam, device))  # rows = batch*beam
        max_lens = sentence_budgets(src_lengths, budget_lengths, max_len_ratio, max_len_offset, prefix,
                                    device)  # (batch,)
        active = torch.arange(batch, device=device)  # sentence ids still searched: (n,)
        beam_scores = torch.zeros(batch, beam, device=device)  # (n, beam) sum of log-probs
        beam_scores[:, 1:] = neg_inf  # all beams start equal: expand only the first
        n_finished = torch.zeros(batch, dtype=torch.long, device=device)  # (n,)
        best_finished = torch.full((batch,), neg_inf, device=device)  # (n,)
        prev_ids = torch.full((batch * beam,), bos_id, dtype=torch.long, device=device)
        for t in range(int(max_lens.max())):
            logits, state, attn = model.decode_step(prev_ids, state)  # attn: (rows, src_len)
            logp = force_prefix(log_softmax(logits, suppress), prefix, active.repeat_interleave(beam), t)  # (rows, vocab)
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
            trail.finish(attn, finalize, active.unsqueeze(1), top_rows, top_tokens, top_scores, top_logps,
                         top_scores.new_full((1, 1), lp, dtype=torch.float64))  # a fill: no host-to-device copy

            keep = done.logical_not().nonzero().squeeze(1)  # (n_keep,) host sync
            if keep.numel() == 0:
                break
            live_rows = top_rows.gather(1, live_pos)[keep].view(-1)  # (n_keep*beam,)
            live_tokens = top_tokens.gather(1, live_pos)[keep].view(-1)  # (n_keep*beam,)
            trail.extend(live_rows, live_tokens, top_logps.gather(1, live_pos)[keep].view(-1))
            # the same sentences: hypotheses move within them, the source side stays in place
            state = model.reorder_state(state, live_rows, within_sentences=keep.numel() == n)
            beam_scores, prev_ids = live_scores[keep], live_tokens
            active, n_finished, best_finished = active[keep], n_finished[keep], best_finished[keep]
        return SearchResult.from_nbest(trail.nbest(batch, beam, src_lengths.tolist(), eos_id))


@torch.inference_mode()
def sample_search(model: nn.Module, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor, *,
                  topk: int = 0, temperature: float = 1.0, generator: torch.Generator | None = None,
                  max_len_ratio: float = 2.0, max_len_offset: int = 10, bos_id: int = 2,
                  eos_id: int = 3, prefix: Tensor | None = None, suppress: Sequence[int] = (),
                  budget_lengths: Tensor | None = None) -> SearchResult:
    """Random sampling, for back-translation (Edunov et al. 2018): at every step draw the next
    token from softmax(logits / temperature), restricted to the ``topk`` most probable tokens
    (0 = the whole vocabulary; 1 = greedy search), for the whole batch at once.

    The same ``generator`` state gives the same draws. A sentence ends at eos or at its budget.

    Args:
        model: encoder-decoder with the search interface.
        src_ids: (batch, src_len) long. src_mask: (batch, src_len) bool. src_lengths: (batch,).
        topk: candidates per step (>= 0). temperature: > 0; below 1 sharpens, above 1 flattens.
        generator: source of randomness (on the model's device); None = torch's global one.
        max_len_ratio, max_len_offset: output budget per sentence (module docstring).
        budget_lengths: (batch,) the source lengths the budgets count (default src_lengths).
        bos_id, eos_id: special token ids.
        prefix: (batch, prefix_len) forced first tokens, -1 = none (module docstring).

    Returns:
        SearchResult; each score is the sampled tokens' summed log-probability under the
        model (untempered, unrestricted), eos included; n-best lists of one.

    Raises:
        ValueError: bad shapes, budget, topk or temperature.
    """
    check_search_args(src_ids, src_mask, src_lengths, max_len_ratio, max_len_offset, budget_lengths)
    if topk < 0 or not temperature > 0:
        raise ValueError(f"need topk >= 0 and temperature > 0; got {topk}, {temperature}")
    batch, device = src_ids.shape[0], src_ids.device
    if batch == 0:
        return SearchResult([], [], [], [], [])
    with eval_mode(model):
        state = model.init_state(model.encode(src_ids, src_mask, src_lengths))
        max_lens = sentence_budgets(src_lengths, budget_lengths, max_len_ratio, max_len_offset, prefix,
                                    device)  # (batch,)
        all_rows = torch.arange(batch, device=device)  # (batch,)
        prev_ids = torch.full((batch,), bos_id, dtype=torch.long, device=device)
        finished = torch.zeros(batch, dtype=torch.bool, device=device)
        lengths = torch.zeros(batch, dtype=torch.long, device=device)
        log_probs = torch.zeros(batch, device=device)
        tokens, weights, step_logps = [], [], []
        for t in range(int(max_lens.max())):
            logits, state, attn = model.decode_step(prev_ids, state)  # (batch, vocab), (batch, src_len)
            logp = force_prefix(log_softmax(logits, suppress), prefix, all_rows, t)  # (batch, vocab)
            scaled = logp / temperature
            if 0 < topk < scaled.shape[-1]:
                kth = scaled.topk(topk, dim=-1).values[:, -1:]  # (batch, 1)
                scaled = scaled.masked_fill(scaled < kth, float("-inf"))
            probs = scaled.softmax(dim=-1)  # (batch, vocab)
            prev_ids = torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (batch,)
            alive = finished.logical_not()
            lengths += alive
            token_logp = logp.gather(1, prev_ids[:, None]).squeeze(1)  # (batch,)
            log_probs = log_probs + torch.where(alive, token_logp, 0.0)
            step_logps.append(token_logp)
            tokens.append(prev_ids)
            weights.append(attn)
            finished |= (prev_ids == eos_id) | (t + 1 >= max_lens)
            if bool(finished.all()):
                break
        token_rows = torch.stack(tokens, dim=1).tolist()  # (batch, t)
        attention = torch.stack(weights, dim=1).cpu()  # (batch, t, src_len)
    return _single_hypotheses(token_rows, lengths.tolist(), src_lengths.tolist(), log_probs.tolist(),
                              attention, torch.stack(step_logps, dim=1).tolist(), eos_id)
