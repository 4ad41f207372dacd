"""Prefix completion (issue 22 item 3): the output starts with the given prefix exactly and the
search completes it; batched like any search; no prefix decodes exactly as before."""

import pytest

from attnmt.translator import Translator

SOURCES = ["Hund rot haus .", "Katze blau .", "Mann frau kind ball .", "", "Baum ."]
PREFIXES = ["Dog blue", None, "Man", "Tree", "Quokka"]  # "Quokka": a word the vocabulary lacks


@pytest.mark.parametrize("beam", [1, 3])
def test_output_starts_with_the_prefix_and_batches_equal_single_sentences(toy_run, beam):
    translator = Translator.load(toy_run, device="cpu")
    plain = translator.translate(SOURCES, beam_size=beam)
    results = translator.translate(SOURCES, beam_size=beam, n_best=beam, target_prefix=PREFIXES)
    for source, prefix, result, before in zip(SOURCES, PREFIXES, results, plain):
        if prefix is None:  # no prefix: exactly as before, token for token
            assert result.tokens == before.tokens and result.score == pytest.approx(before.score)
            continue
        words = prefix.split()
        assert result.tokens[:len(words)] == words
        assert result.text.startswith(prefix)
        assert all(alt.tokens[:len(words)] == words for alt in result.alternatives)
        alone = translator.translate([source], beam_size=beam, target_prefix=[prefix])[0]
        assert alone.tokens == result.tokens and alone.score == pytest.approx(result.score, abs=1e-5)
    assert results[3].tokens[0] == "Tree"  # an empty source still gets its prefix
    assert results[4].tokens[0] == "Quokka" and 0 not in results[4].replaced


def test_the_completion_is_the_model_s_own(toy_run):
    """The copy model translates "Hund rot ." as "Dog red ."; given "Dog" it completes the same."""
    translator = Translator.load(toy_run, device="cpu")
    full = translator.translate(["Hund rot haus ."], beam_size=1)[0]
    for cut in range(len(full.tokens) + 1):
        prefix = " ".join(full.tokens[:cut])
        assert translator.translate(["Hund rot haus ."], beam_size=1, target_prefix=[prefix])[0].tokens == full.tokens


def test_a_single_string_takes_a_single_prefix_and_bad_prefixes_are_named(toy_run):
    translator = Translator.load(toy_run, device="cpu")
    assert translator.translate("Hund rot .", beam_size=1, target_prefix="Cat")[0].tokens[0] == "Cat"
    with pytest.raises(ValueError, match="target_prefix"):
        translator.translate(["Hund .", "Katze ."], target_prefix=["Dog"])
    with pytest.raises(ValueError, match="target_prefix"):
        translator.translate(["Hund ."], target_prefix=[3])
