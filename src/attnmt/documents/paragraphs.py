"""A document's text as units the model translates one at a time (a paragraph, a table cell, a
subtitle, a PO entry), each with the spans that markup.place_spans puts back by word alignment.

    pieces = [Text("Ein ", base), Text("roter", bold), Text(" Ball.", base)]   # as a format reads them
    unit = build_unit(pieces, write=..., styled=True)   # "Ein roter Ball." with one Styled span
    units = Units([unit, ...]); units.sentences; units.render(translations)   # each unit written back

A format turns its paragraphs into pieces: text (with a style key: runs of a Word paragraph), atoms
(kept whole and placed at their relative position: a tab, a footnote mark, a picture, an inline
code) and groups (an element wrapping pieces: a link, an ODF span). Text that is not prose is
kept by the one rule of protected.py for every format (URLs, e-mail addresses, domains,
placeholders, tags): it becomes Literal atoms the model never reads, and comes back exactly, in
its place. A unit with no letters for the model (numbers, punctuation) is not translated.

With `styled=True` (Word, PowerPoint: every character is in some run), the style holding the most
characters of a level is its base, written as plain text; each stretch of another style is a
Styled span, placed like an HTML <b> (markup.place_spans: on its aligned words, or the nearest
free word when it has none, never emptied).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from attnmt.documents.safety import DocumentTooLarge
from attnmt.documents.markup import (AlignedTranslation, Literal, MarkupDocument, Placed, Span, model_text,
                                     place_spans)
from attnmt.documents.protected import PROTECTED, has_letters
from attnmt.documents.review import LowConfidence, low_confidence


@dataclass(eq=False)
class Styled:
    """A stretch of text in a style other than its level's base: written back in `template`."""

    template: Any
    key: Any = None  # the style key it stands for


@dataclass(eq=False)
class Group:
    """An element wrapping pieces (a link, a span): refilled with its placed content; its plain
    text is written in `base`'s style."""

    element: Any
    base: Any = None


@dataclass
class Piece:
    """What a format reads from a paragraph: kind "text" (with `style` key and `template`),
    "atom" (`node` kept whole; `breaks`: it separates words) or "group" (`node`, `children`)."""

    kind: str
    text: str = ""
    style: Any = None
    template: Any = None
    node: Any = None
    breaks: bool = False
    children: list[Piece] = field(default_factory=list)


def text(value: str, style: Any = None, template: Any = None) -> Piece:
    return Piece("text", text=value, style=style, template=template)


def atom(node: Any, *, breaks: bool = False) -> Piece:
    return Piece("atom", node=node, breaks=breaks)


def group(node: Any, children: list[Piece]) -> Piece:
    return Piece("group", node=node, children=children)


@dataclass
class Unit:
    """One text the model translates: its source text, spans and break positions, how its
    translation is written back (`write(content)`, content as markup.place_spans gives it) and,
    in the formats that have one, how a low-confidence mark is added after it (`mark(note)`,
    review.py; None: the format has none)."""

    text: str
    spans: list[Span]
    breaks: list[int]
    write: Callable[[list[str | Placed]], None]
    base: Any = None  # the template of the top level's plain text (styled formats)
    mark: Callable[[LowConfidence], None] | None = None

    @property
    def sentence(self) -> str:
        return model_text(self.text, self.breaks)


class _Builder:
    def __init__(self, styled: bool):
        self.parts: list[str] = []
        self.length = 0
        self.breaks: list[int] = []
        self.styled = styled

    def add_text(self, value: str, template: Any) -> list[Span]:
        """Add `value`; its protected stretches become Literal atoms (returned)."""
        spans = []
        pos = 0
        for match in PROTECTED.finditer(value):
            self._add(value[pos:match.start()])
            spans.append(Span(Literal(match.group(), template), self.length, self.length, atom=True))
            pos = match.end()
        self._add(value[pos:])
        return spans

    def _add(self, value: str) -> None:
        self.parts.append(value)
        self.length += len(value)

    def level(self, pieces: Sequence[Piece]) -> tuple[list[Span], Any]:
        """The spans of one level of pieces, and the template of its plain text."""
        base_style, base = None, None
        if self.styled:
            counts: Counter = Counter()
            templates = {}
            for piece in pieces:
                if piece.kind == "text":
                    counts[piece.style] += len(piece.text)
                    templates.setdefault(piece.style, piece.template)
            if counts:
                base_style = max(counts, key=lambda style: counts[style])  # most characters; first on ties
                base = templates[base_style]
        spans: list[Span] = []
        styled: Span | None = None  # the open Styled span (consecutive text pieces of one style)
        for piece in pieces:
            if piece.kind == "text" and self.styled and piece.style != base_style:
                if styled is None or styled.node.key != piece.style:
                    styled = Span(Styled(piece.template, piece.style), self.length, self.length, atom=False)
                    spans.append(styled)
                styled.children.extend(self.add_text(piece.text, piece.template))
                styled.end = self.length
                continue
            styled = None
            start = self.length
            if piece.kind == "text":
                spans.extend(self.add_text(piece.text, piece.template))
            elif piece.kind == "atom":
                spans.append(Span(piece.node, start, start, atom=True))
                if piece.breaks:
                    self.breaks.append(start)
            else:
                children, inner_base = self.level(piece.children)
                spans.append(Span(Group(piece.node, inner_base if inner_base is not None else base),
                                  start, self.length, atom=False, children=children))
        return spans, base


def build_unit(pieces: Sequence[Piece], write: Callable[[list[str | Placed], Any], None], *,
               styled: bool = False) -> Unit | None:
    """The unit of `pieces`, or None when it holds nothing for the model (no letters: empty,
    numbers, punctuation, only URLs or placeholders). `write(content, base)` writes a translation back."""
    builder = _Builder(styled)
    spans, base = builder.level(pieces)
    joined = "".join(builder.parts)
    if not has_letters(joined):
        return None
    return Unit(joined, spans, builder.breaks, lambda content: write(content, base), base)


def plain_text(content: Sequence[str | Placed]) -> str:
    """Placed content as plain text: output text and Literal atoms (other atoms and groups
    contribute their own content's text)."""
    out = []
    for piece in content:
        if isinstance(piece, str):
            out.append(piece)
        elif isinstance(piece.node, Literal):
            out.append(piece.node.text)
        elif not piece.atom:
            out.append(plain_text(piece.content))
    return "".join(out)


class Units:
    """Units of one document, translated together: `sentences` in order, `render(translations)`;
    a unit translated less confidently than `review_below` (None: never) gets its mark."""

    def __init__(self, name: str, max_units: int, review_below: float | None = None):
        self.name = name
        self.max_units = max_units
        self.review_below = review_below
        self.units: list[Unit] = []
        self.seen = 0  # paragraphs looked at, empty ones included

    def count(self, paragraphs: int, where: str) -> None:
        """Count paragraphs read (translated or not) against the limit."""
        self.seen += paragraphs
        if self.seen > self.max_units:
            raise DocumentTooLarge(f"{where}: more than {self.max_units:,} paragraphs (empty ones included); "
                                   f"refused")

    def add(self, unit: Unit | None) -> None:
        if unit is not None:
            self.units.append(unit)

    @property
    def sentences(self) -> list[str]:
        return [unit.sentence for unit in self.units]

    def render(self, translations: Sequence[AlignedTranslation]) -> None:
        if len(translations) != len(self.units):
            raise ValueError(f"{len(translations)} translations for {len(self.units)} sentences")
        for unit, translation in zip(self.units, translations):
            unit.write(place_spans(unit.text, unit.spans, translation))
            note = low_confidence(translation.confidence, self.review_below)
            if note is not None and unit.mark is not None:
                unit.mark(note)

    def sentences_with(self, parts: Sequence[tuple[Any, MarkupDocument]]) -> list[str]:
        """The units' sentences, then each markup part's (a document holding both: EPUB, subtitles)."""
        return self.sentences + [s for _, part in parts for s in part.sentences]

    def render_with(self, parts: Sequence[tuple[Any, MarkupDocument]],
                    translations: Sequence[AlignedTranslation]) -> list[list[AlignedTranslation]]:
        """Write the units back with the first translations (in the order of `sentences_with`) and
        return each part's share of the rest, for the caller to render."""
        translations = list(translations)
        self.render(translations[:len(self.units)])
        shares, start = [], len(self.units)
        for _, part in parts:
            shares.append(translations[start:start + len(part.sentences)])
            start += len(part.sentences)
        return shares
