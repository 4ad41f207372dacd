"""Review marks: a document's translations less confident than `review_below` are marked for a
person to review, each in the form its format's own tools read (issue 63).

    note = low_confidence(0.31, 0.5)   # LowConfidence(0.31, 0.5); None at or above 0.5, or unknown
    note.text                          # "confidence 0.31 (below 0.50)"
    note.comment                       # "attnmt: confidence 0.31 (below 0.50): please review"

A unit's confidence is its translation's (markup.AlignedTranslation.confidence: a paragraph is as
sure as its least sure sentence, decoding/paragraphs.py); paragraphs.Units.render asks this
module whether a unit is below, and the unit's format writes the mark, after the translated text,
which the mark never changes:
- .docx: a Word comment by "attnmt" around the paragraph (office.py: word/comments.xml);
- .odt: an office:annotation by "attnmt" over the paragraph (office.py);
- .po: a translator comment `# attnmt: confidence ...` on the entry, fuzzy as every machine
  translation is (po.py);
- XLIFF 1.x: `<note from="attnmt" priority="1">` in the trans-unit, whose target is
  needs-review-translation anyway; 2.0: `<note category="attnmt" priority="1">` in the unit's
  <notes> (xliff.py).
The other formats carry no mark (formats.Format.reviews is False): plain text, HTML, subtitles,
EPUB and PDF have no place a reviewer's tool reads, and a slide's comments (.pptx, .odp) belong to
the slide at a position, not to a paragraph. Asking for marks on them is refused, not ignored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attnmt.bounds import CONFIDENCE

AUTHOR = "attnmt"  # who the marks are by: a Word comment's author, an annotation's dc:creator, an XLIFF note's


@dataclass(frozen=True)
class LowConfidence:
    """A translation's confidence, below the `below` it was held to."""

    confidence: float
    below: float

    @property
    def text(self) -> str:
        """"confidence 0.31 (below 0.50)": the confidence cut (not rounded) to two decimals, so it
        never reads as the threshold it is below."""
        shown = math.floor(round(self.confidence * 100, 6)) / 100  # 0.29 * 100 is 28.999...
        below = f"{self.below:.2f}" if round(self.below, 2) == self.below else f"{self.below:g}"
        return f"confidence {shown:.2f} (below {below})"

    @property
    def comment(self) -> str:
        """The text of a comment that a reader sees beside the paragraph (.docx, .odt)."""
        return f"{AUTHOR}: {self.text}: please review"


def check_review_below(value: object, *, error: type[Exception] = ValueError) -> None:
    """The rule of `review_below`: None (no marks) or a probability (bounds.CONFIDENCE, as min_confidence's).

    Raises:
        error: "review_below=1.5 must be in 0..1", or "... must be a number".
    """
    if value is not None:
        CONFIDENCE.check("review_below", value, error=error)


def low_confidence(confidence: float | None, below: float | None) -> LowConfidence | None:
    """The mark a translation of `confidence` gets under `below`: None when marks are off (`below`
    None), its confidence is unknown, or it is at least `below`."""
    if below is None or confidence is None or confidence >= below:
        return None
    return LowConfidence(float(confidence), float(below))
