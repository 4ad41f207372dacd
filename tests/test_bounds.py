"""bounds.py: one range per bounded number, read by the config, the CLI, decoding and the service."""

import math

import pytest
from hypothesis import given, strategies as st

from attnmt.bounds import BEAM, EXPIRE_MINUTES, LENGTH_PENALTY, SAMPLING_TEMPERATURE, Bound

numbers = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True), st.booleans())


@given(numbers, st.integers(-5, 5), st.integers(0, 10), st.booleans(), st.booleans())
def test_contains_is_the_stated_rule(value, low, width, integer, low_open):
    bound = Bound(low, low + width, integer=integer, low_open=low_open)
    number = not isinstance(value, bool) and (isinstance(value, int) or not integer)
    finite = isinstance(value, int) or math.isfinite(value)
    inside = (low < value if low_open else low <= value) and value <= low + width if finite else False
    assert bound.contains(value) == (number and inside)


@pytest.mark.parametrize("bound,name,value,message", [
    (BEAM, "beam_size", 17, r"^beam_size=17 must be in 1\.\.16$"),
    (BEAM, "n_best", 0, r"^n_best=0 must be in 1\.\.16$"),
    (BEAM, "beam_size", 2.0, r"^beam_size=2\.0 must be an integer$"),
    (BEAM, "beam_size", True, r"^beam_size=True must be an integer$"),
    (LENGTH_PENALTY, "length_penalty", float("nan"), r"^length_penalty=nan must be in 0\.\.10$"),
    (SAMPLING_TEMPERATURE, "t", "1", r"^t='1' must be a number$"),
    (EXPIRE_MINUTES, "files_expire_minutes", 0, r"^files_expire_minutes=0 must be in \(0, 10080\]$"),
])
def test_check_names_the_argument(bound, name, value, message):
    with pytest.raises(ArithmeticError if name == "t" else ValueError, match=message):
        bound.check(name, value, error=ArithmeticError if name == "t" else ValueError)


def test_the_values_at_the_bounds_pass():
    for bound in (BEAM, LENGTH_PENALTY, SAMPLING_TEMPERATURE):
        bound.check("x", bound.low)
        bound.check("x", bound.high)
    EXPIRE_MINUTES.check("x", EXPIRE_MINUTES.high)
    assert not EXPIRE_MINUTES.contains(0.0) and EXPIRE_MINUTES.contains(1e-9)
