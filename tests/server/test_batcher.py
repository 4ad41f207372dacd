"""The micro-batcher's turns (server/batcher.py), with a model stand-in that records each call: a
request of many sentences is a series of batches of max_batch_sentences, a one-sentence request
that arrives meanwhile goes into the next batch (issue 66 group A: it waited for the whole of
the long one), options never mix, per-sentence data travels with its sentence, and a request
cancelled (its client gone) has none of its sentences translated after that."""

from __future__ import annotations

import asyncio
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmt.decoding.options import DecodingOptions
from attnmt.server.batcher import MicroBatcher

GREEDY, BEAM = DecodingOptions(beam_size=1), DecodingOptions(beam_size=3)


class Model:
    """translate_fn: each call's texts and extras recorded; a call waits for `gate` when given."""

    def __init__(self, gate: threading.Event | None = None):
        self.calls: list[tuple[list[str], DecodingOptions, dict]] = []
        self.gate = gate

    def __call__(self, texts, options, **extra):
        self.calls.append((list(texts), options, extra))
        if self.gate is not None:
            assert self.gate.wait(timeout=60)
        return [f"<{t}>" for t in texts]


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=120))


async def started(model, **settings) -> MicroBatcher:
    batcher = MicroBatcher(model, max_wait_ms=settings.pop("max_wait_ms", 0), max_batch_sentences=settings.pop("batch", 4))
    await batcher.start()
    return batcher


def test_a_short_request_goes_into_the_next_batch_while_a_long_one_runs():
    model = Model()

    async def scenario():
        batcher = await started(model, batch=4)
        long = asyncio.ensure_future(batcher.translate([f"long {i}" for i in range(40)], GREEDY))
        await asyncio.sleep(0)  # the long request is queued first
        short = await batcher.translate(["short"], GREEDY)
        calls_when_short_answered = len(model.calls)
        found = await long
        await batcher.close()
        return short, found, calls_when_short_answered

    short, found, calls = run(scenario())
    assert short == ["<short>"] and found == [f"<long {i}>" for i in range(40)]
    assert calls <= 2  # the first batch (all of the long one) and the next, which holds "short"
    assert all(len(texts) <= 4 for texts, _, _ in model.calls)
    assert [t for texts, _, _ in model.calls for t in texts].count("short") == 1


def test_two_long_requests_take_turns_and_options_never_mix():
    model = Model()

    async def scenario():
        batcher = await started(model, batch=4)
        a = asyncio.ensure_future(batcher.translate([f"a{i}" for i in range(8)], GREEDY))
        b = asyncio.ensure_future(batcher.translate([f"b{i}" for i in range(8)], GREEDY))
        c = asyncio.ensure_future(batcher.translate([f"c{i}" for i in range(3)], BEAM))
        out = await asyncio.gather(a, b, c)
        await batcher.close()
        return out

    a, b, c = run(scenario())
    assert a == [f"<a{i}>" for i in range(8)] and b == [f"<b{i}>" for i in range(8)] and c == [f"<c{i}>" for i in range(3)]
    first, second = model.calls[0][0], model.calls[1][0]
    assert first == ["a0", "b0", "a1", "b1"]  # one sentence of each request in turn
    assert any(t.startswith("c") for t in second)  # the beam request's turn comes next: it does not wait for both
    for texts, options, _ in model.calls:
        assert len({t[0] == "c" for t in texts}) == 1 and (options == BEAM) == texts[0].startswith("c")


def test_prefixes_and_constraints_travel_with_their_sentences_and_never_with_plain_ones():
    model = Model()

    async def scenario():
        batcher = await started(model, batch=8, max_wait_ms=50)
        plain = asyncio.ensure_future(batcher.translate(["p0", "p1"], GREEDY))
        guided = asyncio.ensure_future(batcher.translate(["g0", "g1"], GREEDY, target_prefix=["A", None],
                                                         constraints=[[("x", "y")], None]))
        out = await asyncio.gather(plain, guided)
        await batcher.close()
        return out

    run(scenario())
    by_first = {texts[0][0]: (texts, extra) for texts, _, extra in model.calls}
    assert by_first["p"] == (["p0", "p1"], {})
    assert by_first["g"] == (["g0", "g1"], {"target_prefix": ["A", None], "constraints": [[("x", "y")], None]})


def test_a_cancelled_request_has_nothing_more_translated():
    gate = threading.Event()
    model = Model(gate)

    async def scenario():
        batcher = await started(model, batch=2)
        job = asyncio.ensure_future(batcher.translate([f"s{i}" for i in range(20)], GREEDY))
        while not model.calls:  # the first batch is in the model
            await asyncio.sleep(0.01)
        job.cancel()  # what server/limits.py does when the client goes away
        gate.set()
        other = await batcher.translate(["after"], GREEDY)
        await batcher.close()
        return other

    assert run(scenario()) == ["<after>"]
    translated = [t for texts, _, _ in model.calls for t in texts]
    assert translated == ["s0", "s1", "after"]  # the batch in hand ends; none of the other 18 is started


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 30), min_size=1, max_size=6), batch=st.integers(1, 8))
def test_every_sentence_once_in_order_and_batches_bounded(sizes, batch):
    """Generated requests: each gets its own sentences back in order, each sentence is translated
    once, no batch passes max_batch_sentences, and each request's first sentence is in one of
    the first len(requests) batches (the turns)."""
    model = Model()

    async def scenario():
        batcher = await started(model, batch=batch)
        jobs = [asyncio.ensure_future(batcher.translate([f"{r}:{i}" for i in range(n)], GREEDY))
                for r, n in enumerate(sizes)]
        out = await asyncio.gather(*jobs)
        await batcher.close()
        return out

    out = run(scenario())
    assert out == [[f"<{r}:{i}>" for i in range(n)] for r, n in enumerate(sizes)]
    flat = [t for texts, _, _ in model.calls for t in texts]
    assert sorted(flat) == sorted(f"{r}:{i}" for r, n in enumerate(sizes) for i in range(n))
    assert all(len(texts) <= batch for texts, _, _ in model.calls)
    first_batch_of = {}
    for k, (texts, _, _) in enumerate(model.calls):
        for t in texts:
            first_batch_of.setdefault(t.split(":")[0], k)
    assert max(first_batch_of.values()) <= len(sizes)


@pytest.mark.parametrize("bad", [dict(max_wait_ms=-1, max_batch_sentences=2), dict(max_wait_ms=1, max_batch_sentences=0)])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError, match="max_wait_ms"):
        MicroBatcher(Model(), **bad)
