"""Length-bucketed, padded, batch-first id tensors.

Shapes:
    batch:   sentences in the batch
    src_len: longest source in the batch
    tgt_len: longest target in the batch + 1 (for <bos> in tgt_in, <eos> in tgt_out)

`make_batches` sorts the examples by (source length, target length) with a random tie-break
drawn from (seed, epoch), cuts the sorted list into batches of similar lengths (little padding,
as in fairseq), and shuffles the batch order with the same generator: the same (seed, epoch)
gives the same batches, another epoch gives other batches in another order.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from attnmt.masks import lengths_to_mask

logger = logging.getLogger(__name__)

Example = tuple[Sequence[int], Sequence[int]]


@dataclass
class Batch:
    """One padded batch. Masks are bool, True = real token.

    Attributes:
        src_ids: (batch, src_len) long, padded with pad_id.
        src_mask: (batch, src_len) bool.
        src_lengths: (batch,) long.
        tgt_in: (batch, tgt_len) long, `<bos> y1 .. yn` then padding; None at inference.
        tgt_out: (batch, tgt_len) long, `y1 .. yn <eos>` then padding; None at inference.
        tgt_mask: (batch, tgt_len) bool; None at inference.
        index: (batch,) long, positions of the examples in the list given to `make_batches`.
    """

    src_ids: Tensor
    src_mask: Tensor
    src_lengths: Tensor
    tgt_in: Tensor | None
    tgt_out: Tensor | None
    tgt_mask: Tensor | None
    index: Tensor
    # Counted on the CPU when the batch is built, so reading it never syncs with a GPU.
    _num_tgt_tokens: int | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return self.src_ids.size(0)

    @property
    def num_tgt_tokens(self) -> int:
        """Target tokens to predict (`tgt_out` without padding, <eos> included); 0 at inference."""
        if self._num_tgt_tokens is None:
            self._num_tgt_tokens = 0 if self.tgt_mask is None else int(self.tgt_mask.sum())
        return self._num_tgt_tokens

    def to(self, device: torch.device | str) -> Batch:
        """A copy with every tensor on `device` (non-blocking copies)."""
        def move(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.to(device, non_blocking=True)

        return replace(self, src_ids=move(self.src_ids), src_mask=move(self.src_mask),
                       src_lengths=move(self.src_lengths), tgt_in=move(self.tgt_in),
                       tgt_out=move(self.tgt_out), tgt_mask=move(self.tgt_mask),
                       index=move(self.index), _num_tgt_tokens=self.num_tgt_tokens)


def _pad(seqs: Sequence[Sequence[int]], pad_id: int, extra: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """Pad id sequences (lists, or numpy arrays from prepared data) into a preallocated tensor,
    without a loop over the batch.

    Returns:
        ids (batch, max_len + extra), mask (batch, max_len + extra) of the real ids, lengths (batch,)
    """
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)  # (batch,)
    width = (int(lengths.max()) if len(seqs) else 0) + extra
    mask = lengths_to_mask(lengths, width)  # (batch, width)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)  # (batch, width)
    if len(seqs) and isinstance(seqs[0], np.ndarray):
        flat = torch.from_numpy(np.concatenate(seqs).astype(np.int64, copy=False))
    else:
        flat = torch.tensor(list(chain.from_iterable(seqs)), dtype=torch.long)
    ids[mask] = flat  # row-major fill
    return ids, mask, lengths


def collate(examples: Sequence[Example], index: Sequence[int] | Tensor, *, pad_id: int, bos_id: int,
            eos_id: int) -> Batch:
    """Build one Batch from (src_ids, tgt_ids) pairs (tgt may be empty at inference); `index`
    names the examples (Batch.index)."""
    src_ids, src_mask, src_lengths = _pad([src for src, _ in examples], pad_id)
    body, _, tgt_lengths = _pad([tgt for _, tgt in examples], pad_id, extra=1)  # (batch, tgt_len)
    rows = torch.arange(len(examples))
    tgt_out = body.clone()
    tgt_out[rows, tgt_lengths] = eos_id  # y1 .. yn <eos>
    bos = torch.full((len(examples), 1), bos_id, dtype=torch.long)  # (batch, 1)
    tgt_in = torch.cat([bos, body[:, :-1]], dim=1)  # (batch, tgt_len): <bos> y1 .. yn
    tgt_mask = lengths_to_mask(tgt_lengths + 1, body.size(1))  # (batch, tgt_len)
    index = index if isinstance(index, Tensor) else torch.tensor(list(index), dtype=torch.long)
    return Batch(src_ids, src_mask, src_lengths, tgt_in, tgt_out, tgt_mask, index=index,
                 _num_tgt_tokens=int(tgt_lengths.sum()) + len(examples))


def _check_sources(src_lists: Sequence[Sequence[int]]) -> None:
    empty = next((i for i, src in enumerate(src_lists) if len(src) == 0), None)
    if empty is not None:
        raise ValueError(f"example {empty} has an empty source; drop or filter it before batching")


def _group(order: list[int], examples: Sequence[Example], batch_size: int, batch_by: str) -> list[list[int]]:
    """Cut length-sorted indices into batches of `batch_size` sentences or padded tokens."""
    if batch_by == "sentences":
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    groups: list[list[int]] = []
    current: list[int] = []
    longest = oversized = 0
    for i in order:
        src, tgt = examples[i]
        size = max(len(src), len(tgt) + 1)  # tgt_in / tgt_out carry one extra token
        if current and (len(current) + 1) * max(longest, size) > batch_size:
            groups.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, size)
        oversized += size > batch_size
    if current:
        groups.append(current)
    if oversized:
        logger.warning("%d example(s) are longer than batch_size=%d tokens and form batches of their own",
                       oversized, batch_size)
    return groups


def make_batches(examples: Sequence[Example], *, batch_size: int, batch_by: str = "sentences",
                 shuffle: bool = True, seed: int = 0, epoch: int = 0, pad_id: int = 0, bos_id: int = 2,
                 eos_id: int = 3) -> list[Batch]:
    """Bucket examples by length and pad them into batches.

    Args:
        examples: (src_ids, tgt_ids) pairs without <bos>/<eos>; tgt_ids may be empty (inference).
        batch_size: sentences per batch, or with batch_by="tokens" the most padded tokens
            (batch * max(src_len, tgt_len)) per batch; an example longer than that is a batch alone.
        batch_by: "sentences" or "tokens".
        shuffle: random tie-break in the length sort and random batch order from (seed, epoch);
            otherwise sorted by length, ties by position, batches from short to long.
        seed, epoch: the generator's seed; every (seed, epoch) gives reproducible batches.
        pad_id, bos_id, eos_id: special ids (the `Vocab` defaults).

    Returns:
        Batches covering every example exactly once.

    Raises:
        ValueError: bad batch_size/batch_by, or an example with an empty source.
    """
    if batch_by not in ("sentences", "tokens"):
        raise ValueError(f"batch_by={batch_by!r}; expected 'sentences' or 'tokens'")
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be >= 1")
    _check_sources([src for src, _ in examples])
    rng = random.Random(f"attnmt-batches:{seed}:{epoch}")  # str seeds are stable across runs
    tie_break = list(range(len(examples)))
    if shuffle:
        rng.shuffle(tie_break)
    order = sorted(range(len(examples)),
                   key=lambda i: (len(examples[i][0]), len(examples[i][1]), tie_break[i]))
    groups = _group(order, examples, batch_size, batch_by)
    if shuffle:
        rng.shuffle(groups)
    return [collate([examples[i] for i in group], group, pad_id=pad_id, bos_id=bos_id, eos_id=eos_id)
            for group in groups]


def make_source_batch(src_id_lists: Sequence[Sequence[int]], pad_id: int = 0) -> Batch:
    """A translation batch of sources in the given order; the tgt fields are None.

    Shapes:
        src_ids, src_mask: (batch, src_len); src_lengths, index: (batch,)

    Raises:
        ValueError: no sources, or an empty source.
    """
    if len(src_id_lists) == 0:
        raise ValueError("make_source_batch needs at least one source")
    _check_sources(src_id_lists)
    src_ids, src_mask, src_lengths = _pad(src_id_lists, pad_id)
    return Batch(src_ids, src_mask, src_lengths, None, None, None,
                 index=torch.arange(len(src_id_lists)), _num_tgt_tokens=0)


def length_sorted_chunks(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """The order every engine decodes in: positions of the non-empty items (length > 0), shortest
    first (ties in input order), in chunks of at most `batch_size`; results go back by position.

    Raises:
        ValueError: batch_size < 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be >= 1")
    todo = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: lengths[i])
    return [todo[start:start + batch_size] for start in range(0, len(todo), batch_size)]
