"""Direction and language codes: one rule, one spelling (direction.py)."""

import argparse
import re

import pytest
from hypothesis import given, strategies as st

from attnmt.direction import Direction, check_language, is_language, names

CODE = re.compile(r"[a-z]{2,3}(_[A-Za-z0-9]{2,8})?")  # written again here: the test's own statement of the rule
codes = st.from_regex(CODE, fullmatch=True)


@given(codes, codes)
def test_a_direction_reads_back_what_it_writes(source, target):
    if source == target:
        with pytest.raises(ValueError, match="two different language codes"):
            Direction.parse(f"{source}-{target}", "x")
        return
    direction = Direction.parse(f"{source}-{target}", "data.pairs[0]")
    assert direction == (source, target) and (direction.source, direction.target) == (source, target)
    assert str(direction) == f"{source}-{target}"
    assert Direction.parse(str(direction), "again") == direction


@given(st.text(max_size=30))
def test_any_text_is_a_direction_only_by_the_rule(text):
    parts = text.split("-")
    expected = len(parts) == 2 and all(CODE.fullmatch(p) for p in parts) and parts[0] != parts[1]
    try:
        Direction.parse(text, "where")
    except ValueError as err:
        assert not expected and str(err).startswith("where=")
    else:
        assert expected


@pytest.mark.parametrize("text", ["de", "de-en-fr", "de-", "-en", "de-de", "DE-EN", "de_en", "../../etc-en", 7, None])
def test_not_a_direction_names_where(text):
    with pytest.raises(LookupError) as err:
        Direction.parse(text, "data.train[2].pair", error=LookupError)
    assert str(err.value).startswith("data.train[2].pair=")


def test_an_argparse_type_error_without_where_shows_the_value_alone():
    with pytest.raises(argparse.ArgumentTypeError, match=r"^'de-de' must be two different"):
        Direction.parse("de-de", "", error=argparse.ArgumentTypeError)


def test_a_long_value_is_shown_short():
    with pytest.raises(ValueError) as err:
        Direction.parse("x" * 10_000, "data.pairs[0]")
    assert len(str(err.value)) < 200


def test_language_codes():
    assert all(is_language(c) for c in ("de", "fra", "pt_BR", "zh_Hant"))
    assert not any(is_language(c) for c in ("D", "deutsch", "de-en", "", "../x", None, 3))
    assert check_language("fr", "data.langs[0]") == "fr"
    with pytest.raises(ValueError, match=r"^data\.langs\[1\]='German' must be a language code"):
        check_language("German", "data.langs[1]")


def test_names_lists_directions_in_order():
    assert names([Direction("de", "en"), ("en", "fr")]) == "de-en, en-fr"
