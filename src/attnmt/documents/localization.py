"""The translators' formats (.po, XLIFF) hold translations people made: one policy for both.

    policy = Existing()                       # the default: what a translator wrote is kept
    policy.translates(has_translation=True)   # False: kept as it is, unmarked
    Existing(retranslate=True).translates(has_translation=True)   # True: translated again, marked

- An entry or unit that already has a translation (a non-empty msgstr, any plural form of it;
  an XLIFF <target> with text) is kept exactly, with its flags, state and approval, unless
  `retranslate` is set (`attnmt translate --retranslate`, the service's `retranslate` field).
- Every translation attnmt writes is marked as a machine's, for a person to review, the way the
  translators' tools read it: .po: the `fuzzy` flag (gettext's tools, msgfmt, Poedit, Weblate);
  XLIFF 1.x: `state="needs-review-translation"` with `state-qualifier="mt-suggestion"` on the
  <target> and no `approved` on its unit; XLIFF 2.0: the segment's `state="initial"` with
  `subState="attnmt:mt"` (2.0 has no state between untranslated and translated).
- Nothing outside the strings it writes changes: po.py edits a .po's text only at its msgstr
  lines and its flags (the header, comments and wrapping stay byte for byte, in the file's own
  charset); xliff.py writes only <target>s and these marks.
- With `review_below`, a translation less confident also says so, in a comment or note of
  attnmt's (review.py); one an earlier run left on an entry or unit attnmt writes again goes.
"""

from __future__ import annotations

from dataclasses import dataclass

FUZZY = "fuzzy"
XLIFF1_STATE = "needs-review-translation"
XLIFF1_QUALIFIER = "mt-suggestion"
XLIFF2_STATE = "initial"
XLIFF2_SUBSTATE = "attnmt:mt"


@dataclass(frozen=True)
class Existing:
    """What to do with translations a file already holds.

    Attributes:
        retranslate: translate them again (marked as machine output) instead of keeping them.
    """

    retranslate: bool = False

    def __post_init__(self):
        if not isinstance(self.retranslate, bool):
            raise TypeError(f"Existing.retranslate must be True or False, not {self.retranslate!r}")

    def translates(self, *, has_translation: bool) -> bool:
        """Whether attnmt writes this entry's translation."""
        return self.retranslate or not has_translation
