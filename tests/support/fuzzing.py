"""The fuzzing profiles every property-based test uses: bounded and derandomized in CI (the same
examples every run, so CI stays fast and repeatable), many more and random with ATTNMT_FUZZ=deep:

    ATTNMT_FUZZ=deep pytest tests/test_*fuzz*.py tests/server/test_fuzz*.py tests/test_integrity.py \
        --hypothesis-show-statistics
"""

import os

from hypothesis import HealthCheck, settings

DEEP = os.environ.get("ATTNMT_FUZZ") == "deep"
QUIET = list(HealthCheck)  # these tests are about the code's answers, not hypothesis's own pacing


def fuzz(ci: int, deep: int, *, deadline_ms: int | None = None) -> settings:
    """Settings for `ci` examples (derandomized) in CI, `deep` random ones with ATTNMT_FUZZ=deep;
    `deadline_ms` fails an example that takes longer (a hang shows up here, not as CI's timeout)."""
    return settings(max_examples=deep if DEEP else ci, derandomize=not DEEP, deadline=deadline_ms,
                    suppress_health_check=QUIET, print_blob=True, database=None)
