"""DecodingOptions: one checked value from every surface down to the search, with one default rule
(the model's search section for what the user left unset)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from attnmt.config import SearchConfig
from attnmt.decoding.options import DecodingOptions


def test_unset_values_come_from_the_models_search_section():
    search = SearchConfig(beam_size=1, length_penalty=0.6)
    assert DecodingOptions().with_defaults(search) == DecodingOptions(beam_size=1, length_penalty=0.6)
    given = DecodingOptions(beam_size=4, length_penalty=0.0).with_defaults(search)
    assert (given.beam_size, given.length_penalty) == (4, 0.0)  # what the user gave stays
    assert DecodingOptions(sampling_topk=5).with_defaults(SearchConfig(beam_size=5)).beam_size == 1  # sampling


def test_keywords_become_the_value_in_one_place():
    base = DecodingOptions(beam_size=2, n_best=2)
    assert DecodingOptions.of(base, alignments=True) == dataclasses.replace(base, alignments=True)
    assert DecodingOptions.of(None) == DecodingOptions()
    with pytest.raises(TypeError, match="beam"):
        DecodingOptions.of(beam=3)  # no such field: a wrong keyword, as in any Python call
    with pytest.raises(TypeError, match="options must be a DecodingOptions"):
        DecodingOptions.of({"beam_size": 3})


def test_n_best_over_the_models_beam_is_refused_when_the_beam_is_known():
    options = DecodingOptions(n_best=3)  # the beam is the model's: not known yet
    with pytest.raises(ValueError, match="n_best=3 must be between 1 and beam_size=2"):
        options.with_defaults(SearchConfig(beam_size=2))


@pytest.mark.parametrize("change,message", [
    (dict(layer=1.5), r"layer=1\.5 must be an integer index"), (dict(head=True), r"head=True must be an integer"),
    (dict(replace_unk="yes"), r"replace_unk='yes' must be true, false or None"),
    (dict(alignments=1), r"alignments=1 must be true or false"),
    (dict(split_sentences=None), r"split_sentences=None must be true or false"),
    (dict(source_lang="German"), r"source_lang='German' must be a language code"),
    (dict(batch_size=0), r"batch_size=0 must be a positive integer"),
    (dict(sampling_topk=3, beam_size=4), r"sampling \(sampling_topk=3\) draws one translation: it needs beam_size=1"),
])
def test_every_field_is_checked_by_name(change, message):
    with pytest.raises(ValueError, match=message):
        DecodingOptions(**change)


def test_equal_options_are_one_key_and_survive_a_round_trip():
    """The micro-batcher groups sentences by equal options; a job's settings record them as JSON."""
    a, b = DecodingOptions(beam_size=2, target_lang="en"), DecodingOptions(beam_size=2, target_lang="en")
    assert a == b and hash(a) == hash(b) and len({a, b, DecodingOptions(beam_size=3)}) == 2
    assert DecodingOptions(**json.loads(json.dumps(dataclasses.asdict(a)))) == a
