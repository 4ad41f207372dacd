"""How the CTranslate2 engine calls CTranslate2 (issue 25): one translate_batch per call with the
largest output budget, hypotheses cut to each sentence's own budget afterwards, and the thread
settings. The rule checked: a sentence ends exactly as it would alone, with its own budget."""

import dataclasses
import json

import numpy as np
import pytest

from attnmt.decoding.options import DecodingOptions
from attnmt.errors import AttnmtError

pytest.importorskip("ctranslate2")

pytestmark = pytest.mark.learned  # the trained-model test asserts what the toy model learned

from attnmt.engines.ctranslate2 import load_export, thread_settings  # noqa: E402
from attnmt.engines.ctranslate2_export import export_run  # noqa: E402
from attnmt.translator import Translator  # noqa: E402

# source lengths 1 to 6: six different budgets in one call
SOURCES = ["hund katze haus", "rot blau", "mann frau kind ball wasser", "baum", "groß klein auto rot hund katze",
           "", "unbekannt wort hund"]


def _alone(translator, sources, **kwargs):
    """Each sentence in a call of its own: its budget is the call's largest, nothing is cut."""
    return [translator.translate([s], **kwargs)[0] for s in sources]


def _assert_same(together, alone, atol=1e-5):
    for a, b in zip(together, alone):
        assert a.tokens == b.tokens
        assert [alt.tokens for alt in a.alternatives] == [alt.tokens for alt in b.alternatives]
        if a.tokens or b.tokens:
            assert abs(a.score - b.score) < atol
            np.testing.assert_allclose(a.attention, b.attention, atol=1e-6)


def _small_budgets(translator, ratio=0.5, offset=1):
    """Budgets of 0.5 x source + 1 tokens, so that a trained model reaches many of them."""
    cfg = dataclasses.replace(translator.engine.search_cfg, max_len_ratio=ratio, max_len_offset=offset)
    translator.engine.search_cfg = cfg
    return translator


@pytest.fixture
def random_export(tmp_path, random_run):
    """A random-weights run (every hypothesis runs to its budget) and its export."""
    run = random_run(tmp_path / "run")
    return run, export_run(run, tmp_path / "ct2")


@pytest.mark.parametrize("beam", [1, 3])
def test_random_model_sentences_end_as_alone(random_export, beam):
    run, export = random_export
    ct2 = Translator.load(export, engine="ctranslate2")
    together = ct2.translate(SOURCES, beam_size=beam, n_best=min(beam, 2))
    _assert_same(together, _alone(ct2, SOURCES, beam_size=beam, n_best=min(beam, 2)))
    budgets = [2 * len(r.source_tokens) + 10 for r in together if r.source_tokens]
    assert sorted(len(r.tokens) for r in together if r.source_tokens) == sorted(budgets)  # cut, all of them
    native = Translator.load(run, device="cpu").translate(SOURCES, beam_size=1)
    if beam == 1:
        assert [r.tokens for r in native] == [r.tokens for r in together]


def test_a_beam_at_the_calls_largest_budget_is_not_decoded_again(random_export, monkeypatch):
    """Random weights: every beam runs to its budget. Alone, a sentence's budget is the call's: one
    decode (and the one-step greedy that mends the first attention row), not a second with the
    same budget; beside a longer sentence, it runs again with its own, and ends as it did alone."""
    _, export = random_export
    ct2 = Translator.load(export, engine="ctranslate2")
    budgets = []
    decode = ct2.engine._decode
    monkeypatch.setattr(ct2.engine, "_decode", lambda translator, group, src_ids, prefix_ids, budget, *rest:
                        budgets.append(budget) or decode(translator, group, src_ids, prefix_ids, budget, *rest))
    short, long = "hund katze haus", "groß klein auto rot hund katze"
    alone = ct2.translate([short], beam_size=3, n_best=3)[0]
    assert budgets == [2 * 3 + 10, 1] and len(alone.tokens) == 16
    budgets.clear()
    together = ct2.translate([short, long], beam_size=3, n_best=3)
    assert budgets == [2 * 6 + 10, 2 * 3 + 10, 1]
    assert [a.tokens for a in together[0].alternatives] == [a.tokens for a in alone.alternatives]
    assert together[0].score == pytest.approx(alone.score, abs=1e-5)


def test_cut_hypotheses_with_a_prefix_score_as_alone(random_export):
    run, export = random_export
    ct2 = Translator.load(export, engine="ctranslate2")
    prefixes = [None, "dog", "dog cat", None, "tree", None, "dog dog dog"]
    together = ct2.translate(SOURCES, beam_size=1, target_prefix=prefixes)
    alone = [ct2.translate([s], beam_size=1, target_prefix=[p])[0] for s, p in zip(SOURCES, prefixes)]
    _assert_same(together, alone)
    native = Translator.load(run, device="cpu").translate(SOURCES, beam_size=1, target_prefix=prefixes)
    for a, b in zip(native, together):
        assert a.tokens == b.tokens and abs(a.score - b.score) < 1e-4  # forced tokens count 0 in both


def _trained_sources(run_dir):
    corpus = json.loads((run_dir / "config.json").read_text())["data"]["test"]
    return open(corpus + ".de", encoding="utf-8").read().splitlines()[:40]


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("ratio,offset", [(0.5, 1), (1.0, 1)])
def test_trained_model_with_small_budgets_ends_as_alone_and_as_native(prenorm_run, tmp_path, beam, ratio, offset):
    # the reversal task's translations have as many words as the source: budgets of
    # 0.5 x source + 1 cut nearly all of them; source + 1 leaves room for the words, and their eos
    # is the budget's last token (dropped, its log-prob kept, as in search.greedy_search)
    export_run(prenorm_run, tmp_path / "ct2")
    ct2 = _small_budgets(Translator.load(tmp_path / "ct2", engine="ctranslate2"), ratio, offset)
    sources = _trained_sources(prenorm_run)
    together = ct2.translate(sources, beam_size=beam)
    _assert_same(together, _alone(ct2, sources, beam_size=beam))
    budgets = [int(ratio * len(r.source_tokens) + offset) for r in together]
    assert len(set(budgets)) >= 3  # calls with several budgets
    ends = [len(r.tokens) - b for r, b in zip(together, budgets)]
    # How many end at the budget depends on how well the toy model learned, which differs between
    # CPUs (Intel Xeon, seed 1: over 32 of 40 at 1.0 x source + 1) and seeds (AMD EPYC, seeds 1-5: 20-30
    # of 40 at 1.0 x source + 1, 39-40 at 0.5 x source + 1): the bounds only ask that each case
    # occurs often enough to be tested, with room below the worst case seen
    if ratio < 1:
        assert ends.count(0) >= 0.5 * len(sources)  # cut at the budget
    else:
        assert ends.count(-1) >= 0.2 * len(sources)  # eos as the budget's last token
    native = Translator.load(prenorm_run, device="cpu")
    if beam == 1:  # greedy: a budget that holds a sentence's unbounded translation and its eos leaves it whole
        unbounded = native.translate(sources, beam_size=1)  # the default budget, 2 x source + 10
        for r, free, b in zip(together, unbounded, budgets):
            if len(free.tokens) + 1 <= b:
                assert r.tokens == free.tokens
            else:
                assert r.tokens == free.tokens[:b]
    native.engine.search_cfg = ct2.engine.search_cfg
    expected = native.translate(sources, beam_size=beam)
    same = [a.tokens == b.tokens for a, b in zip(expected, together)]
    assert sum(same) >= (1.0 if beam == 1 else 0.95) * len(sources)
    assert max(abs(a.score - b.score) for a, b, s in zip(expected, together, same) if s) < 1e-4


# ----------------------------------------------------------------------------- threads

def test_thread_defaults_arguments_and_environment(monkeypatch):
    import torch

    monkeypatch.delenv("ATTNMT_CT2_INTER_THREADS", raising=False)
    monkeypatch.delenv("ATTNMT_CT2_INTRA_THREADS", raising=False)
    assert thread_settings("cpu") == (torch.get_num_threads(), 1)
    assert thread_settings("cuda") == (1, 0)
    assert thread_settings("cpu", 1, 2) == (1, 2)
    monkeypatch.setenv("ATTNMT_CT2_INTER_THREADS", "1")
    monkeypatch.setenv("ATTNMT_CT2_INTRA_THREADS", "3")
    assert thread_settings("cpu") == (1, 3)
    assert thread_settings("cpu", 2, 1) == (2, 1)  # arguments first
    with pytest.raises(ValueError, match="inter_threads=0 must be >= 1"):
        thread_settings("cpu", 0)
    with pytest.raises(ValueError, match="intra_threads=-1 must be >= 0"):
        thread_settings("cpu", 1, -1)
    monkeypatch.setenv("ATTNMT_CT2_INTER_THREADS", "two")
    with pytest.raises(ValueError, match="ATTNMT_CT2_INTER_THREADS='two' must be an integer"):
        thread_settings("cpu")


def test_thread_settings_reach_the_translator_and_change_no_result(random_export):
    _, export = random_export
    results = []
    for inter, intra in [(2, 1), (1, 2), (1, 1)]:
        engine, _ = load_export(export, inter_threads=inter, intra_threads=intra)
        assert (engine.inter_threads, engine.intra_threads) == (inter, intra)
        assert engine.translator.num_translators == inter
        results.append(engine.translate(SOURCES * 3, DecodingOptions(beam_size=2, batch_size=4)))
    for other in results[1:]:
        _assert_same(results[0], other)


def test_translator_load_passes_threads_to_ctranslate2_and_the_native_engine_refuses_them(random_export):
    run, export = random_export
    t = Translator.load(export, engine="ctranslate2", inter_threads=1, intra_threads=2)
    assert (t.engine.inter_threads, t.engine.intra_threads) == (1, 2)
    assert t.engine.translator.num_translators == 1
    with pytest.raises(AttnmtError, match="inter_threads and intra_threads are CTranslate2's"):
        Translator.load(run, inter_threads=2)


def test_beam_attention_is_each_sentences_own_from_the_first_step(random_export):
    # CTranslate2 4.x gives sentence b of a batch the first attention row of sentence b // beam;
    # the engine takes that row from a one-step greedy decode instead
    run, export = random_export
    engine, _ = load_export(export, inter_threads=1)  # one sub-batch: every sentence shares it
    native = Translator.load(run, device="cpu").translate(SOURCES, beam_size=3, layer=-1)
    for a, b in zip(native, engine.translate(SOURCES, DecodingOptions(beam_size=3))):
        assert a.tokens == b.tokens
        if b.tokens:
            np.testing.assert_allclose(a.attention, b.attention, atol=1e-4)


@pytest.mark.parametrize("beam", [1, 3])
def test_a_source_in_capitals_gets_the_budget_of_the_same_source_in_lower_case(pieces_run, beam):
    """Each output runs to its budget (random weights), counted on the source's pieces in lower
    case where they are fewer: ALL CAPITALS no longer buys three to five times the steps, and the
    two engines agree. The pieces are counted here by sentencepiece itself."""
    run, export, processor = pieces_run
    sources = ["HUND KATZE HAUS BAUM .", "Hund katze haus baum .", "hund katze haus baum .", "ROT blau"]
    counts = [len(processor.encode(text, out_type=str)) for text in sources]
    lower = [len(processor.encode(text.lower(), out_type=str)) for text in sources]
    assert counts[0] >= 2 * lower[0]  # the premise: capitals are cut into letters
    budgets = [2 * min(c, low) + 10 for c, low in zip(counts, lower)]
    for translator in (Translator.load(run, device="cpu"), Translator.load(export, engine="ctranslate2")):
        results = translator.translate(sources, beam_size=beam)
        assert [len(r.source_tokens) for r in results] == counts  # the model still reads what was typed
        assert [len(r.tokens) for r in results] == budgets
        assert all(r.at_length_bound for r in results)
        # a model taught capitals (data.augment.uppercase > 0) answers in them: the pieces count
        translator.engine.search_cfg = dataclasses.replace(translator.engine.search_cfg, budget_in_lower_case=False)
        results = translator.translate(sources, beam_size=beam)
        assert [len(r.tokens) for r in results] == [2 * c + 10 for c in counts]


def test_a_cut_input_is_logged_once(random_export, caplog):
    """The budget reads a sentence with capitals a second time, in lower case, without logging its
    cut again (before: a second line, at another index, with the lower-case reading's count)."""
    run, export = random_export
    long = "Hund " + "katze " * 300 + "."
    for translator in (Translator.load(run, device="cpu"), Translator.load(export, engine="ctranslate2")):
        caplog.clear()
        with caplog.at_level("WARNING", logger="attnmt.decoding.inputs"):
            translator.translate(["Baum .", long], beam_size=1, split_sentences=False)
        cuts = [r.getMessage() for r in caplog.records if "cut to search.max_input_tokens" in r.getMessage()]
        assert cuts == ["input 1: input has 302 tokens: cut to search.max_input_tokens=250"]
