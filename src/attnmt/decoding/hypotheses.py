"""Finished hypotheses: what every search returns (Hypothesis, SearchResult), and the step
records from which the beam searches rebuild them (BeamTrail), shared by search.beam_search and
constraints.constrained_beam_search.

Shapes:
    rows_t: the rows decoded at step t (live hypotheses); n: sentences still searched;
    cand: candidate extensions per sentence; src_len: source positions (padded); k: hypotheses traced.
"""

from __future__ import annotations

import bisect
from typing import Any, Callable, NamedTuple

import torch
from torch import Tensor

__all__ = ["BeamTrail", "EndedHypothesis", "Hypothesis", "SearchResult"]


class Hypothesis(NamedTuple):
    """One finished translation.

    Attributes:
        tokens: target ids without bos / eos.
        score: ``log_prob / gnmt_penalty(len, alpha)`` (beam search); greedy: ``log_prob``.
        log_prob: sum of the token log-probabilities, eos included.
        attention: (len(tokens) [+ 1 for eos], src_length) on the CPU.
        token_log_probs: each produced token's log-probability, eos last when produced (one per
            attention row; forced prefix tokens count 0); they sum to ``log_prob``.
    """

    tokens: list[int]
    score: float
    log_prob: float
    attention: Tensor
    token_log_probs: list[float]


class SearchResult(NamedTuple):
    """Best translation per sentence (in input order) and the n-best lists, best first."""

    tokens: list[list[int]]
    scores: list[float]
    log_probs: list[float]
    attention: list[Tensor]
    nbest: list[list[Hypothesis]]

    @classmethod
    def from_nbest(cls, nbest: list[list[Hypothesis]]) -> SearchResult:
        best = [hyps[0] for hyps in nbest]
        return cls([h.tokens for h in best], [h.score for h in best], [h.log_prob for h in best],
                   [h.attention for h in best], nbest)


class EndedHypothesis(NamedTuple):
    """A finished hypothesis as the trail recorded it, before its tokens are traced back."""

    step: int  # the step it ended at (its length is step + 1, eos included when produced)
    sentence: int
    row: int  # its row at that step
    token: int  # its last token (eos, or any token at the length budget)
    log_prob: float
    token_log_prob: float  # its last token's
    penalty: float  # the length penalty that divides log_prob
    met: int  # constraint tokens met (constrained search; 0 otherwise)

    @property
    def score(self) -> float:
        return self.log_prob / self.penalty


class BeamTrail:
    """What a beam search needs to rebuild hypotheses, one small record per step (rows_t: the
    rows decoded at step t):

        attention[t]  (rows_t, src_len)  each row's cross-attention at step t
        parents[t]    (rows_t+1,)        the row at step t that each row of step t+1 extends
        tokens[t], logps[t]  (rows_t+1,) the token it appended at step t and its log-prob
        ended[t]      the step's candidates, flat: whether each ends there, then the EndedHypothesis fields

    Nothing grows with the hypotheses' length per step; ``nbest`` follows the back-pointers
    once, for the hypotheses that make the n-best lists only. Used by beam_search and
    constraints.constrained_beam_search.
    """

    def __init__(self) -> None:
        self.attention: list[Tensor] = []
        self.parents: list[Tensor] = []
        self.tokens: list[Tensor] = []
        self.logps: list[Tensor] = []
        self.ended: list[tuple[Tensor, ...]] = []

    def finish(self, attn: Tensor, finalize: Tensor, sentences: Tensor, rows: Tensor, tokens: Tensor,
               log_probs: Tensor, token_logps: Tensor, penalties: Tensor, met: Tensor | None = None) -> None:
        """Record step t: its attention (rows_t, src_len) and its candidates, each (n, cand) and
        ``finalize`` saying which end here; kept on the device, so that finding the finished
        ones waits until the search is over. Penalties are kept in float64 (exact for Python
        floats and float32 alike)."""
        self.attention.append(attn)
        step = torch.full_like(rows, len(self.ended))
        met = torch.zeros_like(rows) if met is None else met
        fields = (finalize, step, sentences, rows, tokens, log_probs, token_logps, penalties.double(), met)
        self.ended.append(tuple(x.expand_as(rows).reshape(-1) for x in fields))

    def extend(self, parents: Tensor, tokens: Tensor, logps: Tensor) -> None:
        """Record the live hypotheses after step t: (rows_t+1,) back-pointers, tokens, log-probs."""
        self.parents.append(parents)
        self.tokens.append(tokens)
        self.logps.append(logps)

    def nbest(self, batch: int, size: int, src_lens: list[int], eos_id: int,
              key: Callable[[EndedHypothesis], Any] = lambda e: e.score) -> list[list[Hypothesis]]:
        """Each sentence's best ``size`` finished hypotheses by ``key`` (ties: first finished first)."""
        finalize, *fields = (torch.cat(x) for x in zip(*self.ended))
        ended = [EndedHypothesis(*e) for e in zip(*(x[finalize].tolist() for x in fields))]
        ranked: list[list[int]] = [[] for _ in range(batch)]
        for i, e in enumerate(ended):
            ranked[e.sentence].append(i)
        best = [sorted(hyps, key=lambda i: key(ended[i]), reverse=True)[:size] for hyps in ranked]
        picked = sorted(i for hyps in best for i in hyps)  # by step: the order _trace wants
        if not picked:
            return [[] for _ in range(batch)]
        tokens, logps, attention = self._trace([ended[i].step for i in picked], [ended[i].row for i in picked])
        hyps: dict[int, Hypothesis] = {}
        for j, i in enumerate(picked):
            e = ended[i]
            out = tokens[j][:e.step] + ([] if e.token == eos_id else [e.token])
            hyps[i] = Hypothesis(out, e.score, e.log_prob, attention[j, :e.step + 1, :src_lens[e.sentence]],
                                 logps[j][:e.step] + [e.token_log_prob])
        return [[hyps[i] for i in hyps_of_sentence] for hyps_of_sentence in best]

    def _trace(self, steps: list[int], rows: list[int]) -> tuple[list[list[int]], list[list[float]], Tensor]:
        """Follow the back-pointers of k hypotheses, sorted by the step they ended at, from their
        rows there: tokens and log-probs before their last step (k lists), attention (k, steps, src_len)."""
        k, length = len(steps), steps[-1] + 1
        first = self.attention[0]
        row = torch.tensor(rows, dtype=torch.long, device=first.device)  # (k,)
        tokens = row.new_zeros(k, length)  # (k, steps)
        logps = self.logps[0].new_zeros(k, length) if self.logps else first.new_zeros(k, length)
        attention = first.new_zeros(k, length, first.shape[-1])  # (k, steps, src_len)
        for t in range(length - 1, -1, -1):
            later = bisect.bisect_right(steps, t)  # hypotheses [later:] ended after step t
            if later < k:  # their row at step t+1 -> their token at step t and row at step t
                at = row[later:]
                tokens[later:, t], logps[later:, t] = self.tokens[t][at], self.logps[t][at]
                row[later:] = self.parents[t][at]
            now = bisect.bisect_left(steps, t)  # hypotheses [now:] include step t
            attention[now:, t] = self.attention[t][row[now:]]
        return tokens.tolist(), logps.tolist(), attention.cpu()
