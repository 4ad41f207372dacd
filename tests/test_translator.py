"""The Python API: Translator.load, save -> load round trip, results' fields and batch invariance."""

import numpy as np
import pytest

from attnmt.checkpoint import save_weights
from attnmt.translator import Translator

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
