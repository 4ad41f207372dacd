"""Epochs over prepared data (data/epochs.py): every example once (or `weight` times), batches
within their budget and of similar lengths, the same plan from the same (seed, epoch), ranks
disjoint and complete, and a start position that skips exactly the updates before it."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import yaml

from support import toy
from attnmt.config import config_from_dict
from attnmt.data.epochs import Batching, Epoch, epoch_examples, epoch_rng
from attnmt.data.prepare import prepare


@pytest.fixture
def prepared(toy_corpus):
    cfg = config_from_dict(yaml.safe_load(toy.config_text(toy_corpus)))
    return prepare(cfg.data, workers=1)


def sizes(data, examples):
    return np.maximum(data.src_lengths[examples].astype(int), data.tgt_lengths[examples].astype(int) + 1)


@pytest.mark.parametrize("window", [10_000, 97])
@pytest.mark.parametrize("batch_by, batch_size", [("sentences", 16), ("tokens", 60)])
def test_an_epoch_covers_every_example_once_in_batches_within_budget(prepared, window, batch_by, batch_size):
    epoch = Epoch(prepared, [1.0], Batching(batch_size, batch_by, window=window, seed=3), epoch=2)
    batches = list(epoch.batches())
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(prepared)))
    for batch in batches:
        if batch_by == "sentences":
            assert len(batch) <= batch_size
        else:
            assert len(batch) * sizes(prepared, batch).max() <= batch_size or len(batch) == 1
    # sorted by length within windows: a batch spans few lengths (the toy corpus has lengths 3..7)
    spread = np.mean([np.ptp(prepared.src_lengths[b]) for b in batches])
    assert spread <= (1.0 if window > len(prepared) else 3.0)
    if window > len(prepared):
        assert epoch.total_batches == len(batches)
    else:
        assert epoch.total_batches is None  # several windows: not planned ahead


def test_the_plan_is_a_function_of_seed_and_epoch(prepared):
    def plan(seed, number):
        return [b.tolist() for b in Epoch(prepared, [1.0], Batching(16, window=200, seed=seed), number).batches()]

    assert plan(1, 1) == plan(1, 1)
    assert plan(1, 1) != plan(1, 2) and plan(1, 1) != plan(2, 1)


def test_weights_repeat_a_corpus_and_a_fraction_takes_a_random_share():
    corpus_of = np.array([0] * 10 + [1] * 40, dtype=np.uint8)
    shares = [epoch_examples(corpus_of, [3.0, 0.25], epoch_rng(1, e)) for e in (1, 2)]
    for examples in shares:
        counts = Counter(examples.tolist())
        assert all(counts[i] == 3 for i in range(10))
        taken = [i for i in range(10, 50) if counts[i]]
        assert len(taken) == 10 and all(counts[i] == 1 for i in taken)  # a quarter of 40, each once
    assert set(shares[0].tolist()) != set(shares[1].tolist())  # another share each epoch


@pytest.mark.parametrize("world_size, accum", [(2, 1), (2, 2), (3, 1)])
def test_ranks_take_disjoint_shares_that_make_up_each_update(prepared, world_size, accum):
    batching = Batching(16, window=10_000, seed=1, world_size=world_size, accum_steps=accum)
    epoch = Epoch(prepared, [1.0], batching, 1)
    group = world_size * accum
    planned = list(epoch.batches())
    expected = [planned[i:i + group] for i in range(0, len(planned) - len(planned) % group, group)]
    per_rank = [list(epoch.updates(rank)) for rank in range(world_size)]
    assert all(len(updates) == len(expected) == epoch.total_updates for updates in per_rank)
    for u, update in enumerate(expected):
        shares = [[b.index.tolist() for b in per_rank[r][u].batches] for r in range(world_size)]
        assert all(len(share) == accum for share in shares)
        got = sorted(sorted(batch) for share in shares for batch in share)
        assert got == sorted(sorted(b.tolist()) for b in update)  # disjoint, and together the update
        tokens = sum(int(prepared.tgt_lengths[b].sum()) + len(b) for b in update)
        assert all(per_rank[r][u].global_tokens == tokens for r in range(world_size))


def test_a_start_position_skips_exactly_the_updates_before_it(prepared):
    epoch = Epoch(prepared, [1.0], Batching(16, window=100, seed=5, accum_steps=2), 4)
    whole = [[b.index.tolist() for b in u.batches] for u in epoch.updates()]
    assert [[b.index.tolist() for b in u.batches] for u in epoch.updates(start=7)] == whole[7:]


def test_a_batch_holds_the_examples_ids(prepared):
    epoch = Epoch(prepared, [1.0], Batching(8, seed=1), 1)
    examples = next(iter(epoch.batches()))
    batch = epoch.build(examples)
    for row, i in enumerate(examples.tolist()):
        src, tgt = prepared.ids("src", [i])[0].tolist(), prepared.ids("tgt", [i])[0].tolist()
        assert batch.src_ids[row, :len(src)].tolist() == src and not batch.src_mask[row, len(src):].any()
        assert batch.tgt_in[row, :len(tgt) + 1].tolist() == [2] + tgt
        assert batch.tgt_out[row, :len(tgt) + 1].tolist() == tgt + [3]
    assert batch.index.tolist() == examples.tolist()
