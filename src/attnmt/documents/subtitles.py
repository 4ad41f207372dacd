"""SubRip subtitles (.srt, the `srt` library, MIT): each subtitle's text translated, its number and
timings kept. A subtitle with tags (<i>, <b>, <font>) is translated as HTML (markup.py places the
tags); a plain one is written back on as many lines as it had, cut at the word nearest each
even share of its characters. Subtitles without letters (music notes, "...") stay as they are.
"""

from __future__ import annotations

import re
from typing import Sequence

from attnmt.documents.paragraphs import Units, build_unit, plain_text, text
from attnmt.documents.plain import decode_text
from attnmt.documents.safety import DocumentError, DocumentTooLarge, Limits
from attnmt.documents.markup import AlignedTranslation, MarkupDocument, TooDeep

TAG = re.compile(r"</?[A-Za-z][^<>]*>")


def rewrap(value: str, lines: int) -> str:
    """`value` on `lines` lines (or fewer, when it has fewer words), cut at word boundaries."""
    words = value.split()
    if lines <= 1 or len(words) <= 1:
        return " ".join(words)
    lines = min(lines, len(words))
    total = sum(len(w) for w in words) + len(words) - 1
    out, current, done = [], [], 0
    for i, word in enumerate(words):
        current.append(word)
        done += len(word) + 1
        left_words, left_lines = len(words) - i - 1, lines - len(out) - 1
        if left_lines and (done >= total * (len(out) + 1) / lines or left_words == left_lines):
            out.append(" ".join(current))
            current = []
    out.append(" ".join(current))
    return "\n".join(line for line in out if line)


class SubtitleDocument:
    def __init__(self, data: bytes, name: str, limits: Limits):
        import srt

        source = decode_text(data, name)
        try:
            self.subtitles = list(srt.parse(source))
        except srt.SRTParseError as err:
            line = source.count("\n", 0, err.expected_start) + 1
            raise DocumentError(f"{name}: line {line}: not a subtitle block (number, timings, text): "
                                f"{source[err.expected_start:err.actual_start][:60]!r}") from None
        except (ValueError, OverflowError) as err:
            raise DocumentError(f"{name}: a subtitle cannot be read ({err})") from None
        if not self.subtitles:
            raise DocumentError(f"{name}: no subtitles found")
        self.units = Units(name, limits.max_paragraphs)
        self.units.count(len(self.subtitles), name)
        self.parts: list[tuple[int, MarkupDocument]] = []  # subtitles with tags
        for i, subtitle in enumerate(self.subtitles):
            if TAG.search(subtitle.content):
                try:
                    self.parts.append((i, MarkupDocument(subtitle.content)))
                except TooDeep as err:
                    raise DocumentTooLarge(f"{name}: subtitle {subtitle.index}: {err}") from None
                except ValueError as err:
                    raise DocumentError(f"{name}: subtitle {subtitle.index}: {err}") from None
            else:
                self.units.add(build_unit([text(subtitle.content)], self._writer(i)))

    def _writer(self, i: int):
        def write(content, base) -> None:
            subtitle = self.subtitles[i]
            subtitle.content = rewrap(plain_text(content), subtitle.content.count("\n") + 1)
        return write

    @property
    def sentences(self) -> list[str]:
        return self.units.sentences_with(self.parts)

    def render(self, translations: Sequence[AlignedTranslation]) -> bytes:
        import srt

        for (i, part), share in zip(self.parts, self.units.render_with(self.parts, translations)):
            if part.runs:
                self.subtitles[i].content = part.render(share)
        return srt.compose(self.subtitles, reindex=False).encode("utf-8")
