"""The Python API: Translator.load, save -> load round trip, results' fields and batch invariance."""

import numpy as np
import pytest

from attnmt.checkpoint import save_weights
from attnmt.translator import Translator

pytestmark = pytest.mark.learned  # asserts what a small training learned (make test-seeds)

SENTENCES = ["Hund katze haus .", "Rot blau .", "Mann frau kind ball wasser .", "Baum ."]


@pytest.fixture(scope="module")
def translator(toy_run):
    return Translator.load(toy_run, device="cpu")


def test_save_then_load_gives_identical_outputs(translator, toy_run, tmp_path):
    save_weights(translator.model, toy_run / "checkpoints" / "copy.safetensors")
    copy = Translator.load(toy_run, checkpoint="checkpoints/copy.safetensors", device="cpu")
    for beam in (1, 3):
        a = translator.translate(SENTENCES, beam_size=beam)
        b = copy.translate(SENTENCES, beam_size=beam)
        assert [r.text for r in a] == [r.text for r in b]
        assert [r.score for r in a] == [r.score for r in b]
        for ra, rb in zip(a, b):
            np.testing.assert_array_equal(ra.attention, rb.attention)


def test_result_fields(translator):
    result = translator.translate("Hund katze .", beam_size=3)[0]
    assert result.text.lower().startswith("dog cat")
    assert result.source_tokens == ["Hund", "katze", "."]
    assert result.attention.shape == (len(result.tokens), 3)
    np.testing.assert_allclose(result.attention.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("beam", [1, 3])
def test_same_translation_whatever_the_batch(translator, beam):
    together = translator.translate(SENTENCES, beam_size=beam, batch_size=4)
    alone = [translator.translate([s], beam_size=beam)[0] for s in SENTENCES]
    assert [r.text for r in together] == [r.text for r in alone]
    for a, b in zip(together, alone):
        np.testing.assert_allclose(a.attention, b.attention, atol=1e-5)


def test_bad_beam_size(translator):
    with pytest.raises(ValueError, match="beam_size=0"):
        translator.translate(["Hund ."], beam_size=0)


def _stepwise_log_prob(translator, source: str, target: str) -> float:
    """Teacher-forced log P(target | source), <eos> included, one decode_step at a time in float64
    (independent of the batched full-sequence pass that Translator.score uses)."""
    import torch

    model, pipeline = translator.model, translator.pipeline
    src = torch.tensor([pipeline.encode_source(source)])
    tgt = pipeline.encode_target(target) + [pipeline.tgt_vocab.eos_id]
    with torch.no_grad():
        state = model.init_state(model.encode(src, torch.ones_like(src, dtype=torch.bool),
                                              torch.tensor([src.shape[1]])))
        prev, total = torch.tensor([pipeline.tgt_vocab.bos_id]), 0.0
        for token in tgt:
            logits, state, _ = model.decode_step(prev, state)
            total += float(logits[0].double().log_softmax(-1)[token])
            prev = torch.tensor([token])
    return total


def test_score_matches_a_stepwise_teacher_forced_computation(translator):
    sources = ["Hund katze haus .", "Rot blau .", "Mann frau kind ball wasser .", "Baum ."]
    targets = ["Dog cat house .", "Red .", "Man woman child ball water .", "Tree tree tree big ."]
    scored = translator.score(sources, targets, batch_size=2)
    for source, target, result in zip(sources, targets, scored):
        assert result.num_tokens == len(result.target_tokens) + 1
        assert abs(result.log_prob - _stepwise_log_prob(translator, source, target)) < 1e-4
        assert result.normalized == pytest.approx(result.log_prob / result.num_tokens)
    assert scored[0].log_prob > scored[3].log_prob  # the right translation is the more probable one


def test_score_of_the_best_translation_is_its_search_score(translator):
    result = translator.translate(["Hund katze haus ."], beam_size=1)[0]
    assert translator.score(["Hund katze haus ."], [result.text])[0].log_prob == pytest.approx(result.score, abs=1e-4)


def test_nbest_alternatives(translator):
    result = translator.translate(["Hund katze haus ."], beam_size=3, n_best=3)[0]
    assert len(result.alternatives) == 3
    assert result.alternatives[0].tokens == result.tokens
    scores = [alt.score for alt in result.alternatives]
    assert scores == sorted(scores, reverse=True)
    assert len({tuple(alt.tokens) for alt in result.alternatives}) == 3
    with pytest.raises(ValueError, match="n_best=4"):
        translator.translate(["Hund ."], beam_size=3, n_best=4)


def test_cli_nbest_and_score_output(toy_run, tmp_path, capsys):
    from attnmt.cli import main

    (tmp_path / "in.de").write_text("Hund katze .\nRot blau .\n", encoding="utf-8")
    (tmp_path / "ref.en").write_text("Dog cat .\nRed blue .\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["translate", str(toy_run), "-i", str(tmp_path / "in.de"), "--beam", "3", "--n-best", "2"]) == 0
    blocks = capsys.readouterr().out.split("\n\n")
    assert len(blocks) == 3 and blocks[2] == ""  # two sentences, each followed by an empty line
    for block in blocks[:2]:
        lines = [line.split("\t") for line in block.splitlines()]
        assert [rank for rank, _, _ in lines] == ["1", "2"]
        assert float(lines[0][1]) >= float(lines[1][1])
    assert main(["score", str(toy_run), "-i", str(tmp_path / "in.de"), "-r", str(tmp_path / "ref.en")]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    expected = Translator.load(toy_run, device="cpu").score(["Hund katze .", "Rot blau ."], ["Dog cat .", "Red blue ."])
    assert len(rows) == 2
    for (log_prob, normalized, tokens), result in zip(rows, expected):
        assert float(log_prob) == pytest.approx(result.log_prob, abs=1e-5)
        assert float(normalized) == pytest.approx(result.normalized, abs=1e-5)
        assert int(tokens) == result.num_tokens == 4
    (tmp_path / "short.en").write_text("Dog cat .\n", encoding="utf-8")
    assert main(["score", str(toy_run), "-i", str(tmp_path / "in.de"), "-r", str(tmp_path / "short.en")]) == 2
    assert "has 2 lines" in capsys.readouterr().err


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("split", [False, True])
def test_a_translation_cut_at_its_length_bound_says_so(toy_run, beam, split):
    """search.max_len_ratio 0 and max_len_offset 2: every output stops after two tokens, before the
    model's end (the toy copies 4 words and a full stop): at_length_bound, and LENGTH_BOUND_NOTE in
    its warnings (what the service answers); with the run's own budget neither."""
    import dataclasses

    from attnmt.decoding.inputs import LENGTH_BOUND_NOTE

    free = Translator.load(toy_run, device="cpu")
    tight = Translator.load(toy_run, device="cpu")
    tight.engine.search_cfg = dataclasses.replace(tight.cfg.search, max_len_ratio=0.0, max_len_offset=2)
    text = "Hund katze haus baum ." if not split else "Hund katze haus baum . Rot blau haus baum ."
    done, = free.translate([text], beam_size=beam, split_sentences=split)
    assert not done.at_length_bound and LENGTH_BOUND_NOTE not in done.warnings
    cut, = tight.translate([text], beam_size=beam, split_sentences=split)
    assert cut.at_length_bound and cut.warnings.count(LENGTH_BOUND_NOTE) == 1
    assert len(cut.tokens) == 2 * (2 if split else 1)
