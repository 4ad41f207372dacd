"""Batching: padding, masks, the tgt shift, token budgets, reproducible shuffles, sharding."""

from __future__ import annotations

import random

import pytest
import torch

from attnmt.data.batching import Batch, length_sorted_chunks, make_batches, make_source_batch

PAD, BOS, EOS = 0, 2, 3


def random_examples(n=200, seed=0, max_len=20):
    rng = random.Random(seed)
    return [([rng.randint(4, 50) for _ in range(rng.randint(1, max_len))],
             [rng.randint(4, 50) for _ in range(rng.randint(1, max_len))]) for _ in range(n)]


def check_batch(batch: Batch, examples):
    """Every row matches its example, by an independent per-row reference."""
    for row, i in enumerate(batch.index.tolist()):
        src, tgt = examples[i]
        n, m = len(src), len(tgt)
        assert batch.src_lengths[row] == n
        assert batch.src_ids[row, :n].tolist() == src
        assert (batch.src_ids[row, n:] == PAD).all()
        assert batch.src_mask[row].tolist() == [True] * n + [False] * (batch.src_ids.size(1) - n)
        width = batch.tgt_in.size(1)
        assert batch.tgt_in[row].tolist() == [BOS, *tgt] + [PAD] * (width - m - 1)
        assert batch.tgt_out[row].tolist() == [*tgt, EOS] + [PAD] * (width - m - 1)
        assert batch.tgt_mask[row].tolist() == [True] * (m + 1) + [False] * (width - m - 1)
    assert batch.src_ids.dtype == batch.tgt_in.dtype == batch.tgt_out.dtype == torch.long
    assert batch.src_mask.dtype == batch.tgt_mask.dtype == torch.bool
    assert batch.src_ids.size(1) == int(batch.src_lengths.max())  # no all-padding column


def test_padding_masks_lengths_and_shift():
    examples = [([5, 6, 7], [8, 9]), ([10], [11, 12, 13, 14]), ([15, 16], [])]
    (batch,) = make_batches(examples, batch_size=10, shuffle=False)
    check_batch(batch, examples)
    assert batch.src_ids.shape == (3, 3) and batch.tgt_in.shape == (3, 5)
    assert batch.num_tgt_tokens == 3 + 5 + 1
    assert len(batch) == 3


def test_every_example_exactly_once_and_rows_correct():
    examples = random_examples()
    batches = make_batches(examples, batch_size=16, seed=3)
    seen = torch.cat([b.index for b in batches]).tolist()
    assert sorted(seen) == list(range(len(examples)))
    for batch in batches:
        check_batch(batch, examples)
        assert len(batch) <= 16


def test_token_batches_respect_the_budget():
    examples = random_examples(300, seed=1)
    batches = make_batches(examples, batch_size=100, batch_by="tokens", seed=1)
    assert sorted(torch.cat([b.index for b in batches]).tolist()) == list(range(300))
    for batch in batches:
        assert batch.src_ids.numel() <= 100 and batch.tgt_in.numel() <= 100
    # length bucketing: batches are nearly full and carry little padding
    real = sum(int(b.src_mask.sum()) for b in batches)
    assert real / sum(b.src_ids.numel() for b in batches) > 0.8


def test_oversized_example_gets_its_own_batch(caplog):
    examples = [([4] * 30, [5] * 3), ([4] * 2, [5] * 2)]
    batches = make_batches(examples, batch_size=10, batch_by="tokens", shuffle=False)
    assert [b.index.tolist() for b in batches] == [[1], [0]]
    assert "1 example(s) are longer than batch_size=10 tokens" in caplog.text


def test_shuffle_is_reproducible_and_differs_by_epoch():
    examples = random_examples(300, seed=2)

    def layout(**kw):
        return [b.index.tolist() for b in make_batches(examples, batch_size=8, **kw)]

    assert layout(seed=5, epoch=1) == layout(seed=5, epoch=1)
    assert layout(seed=5, epoch=1) != layout(seed=5, epoch=2)
    assert layout(seed=5, epoch=1) != layout(seed=6, epoch=1)
    unshuffled = layout(shuffle=False, epoch=1)
    assert unshuffled == layout(shuffle=False, epoch=2)
    lengths = [len(examples[i][0]) for batch in unshuffled for i in batch]
    assert lengths == sorted(lengths)


def test_inference_examples_and_source_batch():
    batch = make_source_batch([[5, 6, 7], [8]], pad_id=PAD)
    assert batch.src_ids.tolist() == [[5, 6, 7], [8, PAD, PAD]]
    assert batch.src_mask.tolist() == [[True] * 3, [True, False, False]]
    assert batch.index.tolist() == [0, 1]
    assert batch.tgt_in is None and batch.tgt_out is None and batch.tgt_mask is None
    assert batch.num_tgt_tokens == 0
    (batch,) = make_batches([([5], []), ([6, 7], [])], batch_size=4, shuffle=False)
    assert batch.tgt_in.tolist() == [[BOS], [BOS]] and batch.tgt_out.tolist() == [[EOS], [EOS]]


def test_empty_source_is_rejected():
    with pytest.raises(ValueError, match="example 1 has an empty source"):
        make_batches([([4], [5]), ([], [5])], batch_size=2)
    with pytest.raises(ValueError, match="batch_by='words'"):
        make_batches([([4], [5])], batch_size=2, batch_by="words")


def test_to_keeps_fields_and_none():
    batch = make_source_batch([[5, 6]]).to("cpu")
    assert batch.src_ids.device.type == "cpu" and batch.tgt_in is None
    full = make_batches([([5], [6, 7])], batch_size=1)[0].to(torch.device("cpu"))
    assert full.num_tgt_tokens == 3 and full.tgt_out.tolist() == [[6, 7, EOS]]


def test_length_sorted_chunks_order_every_engine_decodes_in():
    lengths = [3, 0, 1, 3, 2, 0, 1]
    # written out by hand: the non-empty positions by length, ties in input order, chunks of 2
    assert length_sorted_chunks(lengths, 2) == [[2, 6], [4, 0], [3]]
    assert length_sorted_chunks([0, 0], 4) == []
    with pytest.raises(ValueError, match="batch_size=0"):
        length_sorted_chunks(lengths, 0)
