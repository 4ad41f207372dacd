"""HTML translation that keeps the markup: the text is translated per block, inline tags are put
back around the output words that the model's attention aligns with the words they wrapped.

    doc = MarkupDocument("<p>Ein <b>roter</b> Ball.</p>")
    doc.sentences                                    # ["Ein roter Ball."]
    doc.render(aligned_translations([(results, False)]))   # "<p>A <b>red</b> ball.</p>"

`place_spans` is the one placement of spans by alignment (HTML here; every format of documents/
through paragraphs.py), and `aligned_translations` the one step from decoding results (one leg,
or two through a pivot language) to what it places, for the Python API and the service alike.
Parsing is Beautiful Soup's over Python's html.parser. What becomes a sentence, what stays
untouched, and where each inline element is placed from the word alignment: docs/decoding.md.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any, Callable, Sequence

from bs4 import BeautifulSoup, Doctype, NavigableString, PageElement, Tag
from bs4.element import PreformattedString

from attnmt.decoding.alignment import token_texts
from attnmt.documents.protected import has_letters, protected_parts

INLINE = frozenset("a abbr acronym b bdi bdo big cite data del dfn em font i ins kbd label mark q s samp small "
                   "span strike strong sub sup time tt u var".split())
OPAQUE = frozenset("script style code pre textarea svg math template noscript iframe object".split())
VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
BREAKS = frozenset("br hr".split())  # void elements that separate the words on their two sides


@dataclass(frozen=True)
class AlignedTranslation:
    """One sentence's translation with the word alignment that places the tags."""

    text: str                                 # the translation
    source_words: Sequence[str]               # the words the alignment's source indices count
    target_words: Sequence[str]               # the words of `text` its output indices count
    alignment: Sequence[tuple[int, int]]      # (source word, output word) links
    confidence: float | None = None           # the result's (decoding/confidence.py; a paragraph's: its least
                                              # sure sentence's); None: unknown. What documents' review marks read


def aligned_translation(result, *, subword: bool) -> AlignedTranslation:
    """A decoding.TranslationResult (translated with alignments=True) as an AlignedTranslation:
    tokens joined into the words that word_alignment counts, and the result's confidence."""
    return AlignedTranslation(result.text, token_texts(result.source_tokens, subword),
                              token_texts(result.tokens, subword), list(result.alignment or []), result.confidence)


def through_pivot(first: AlignedTranslation, second: AlignedTranslation) -> AlignedTranslation:
    """A translation made in two legs (source -> pivot language -> target) as one: `second`'s text,
    each of its output words linked to the source word that its pivot word's link names in `first`;
    as sure as its less sure leg (unknown when either leg's is)."""
    source_of = dict((mid, src) for src, mid in first.alignment)  # pivot word -> source word
    links = [(source_of[mid], out) for mid, out in second.alignment if mid in source_of]
    known = None if first.confidence is None or second.confidence is None else min(first.confidence, second.confidence)
    return AlignedTranslation(second.text, first.source_words, second.target_words, links, known)


def aligned_translations(legs: Sequence[tuple[Sequence, bool]]) -> list[AlignedTranslation]:
    """Texts translated in one leg, or in several through pivot languages (source -> pivot ->
    target), as AlignedTranslations: `legs` holds each leg's decoding.TranslationResults (in the
    texts' order, translated with alignments=True) and whether its model reads subwords; the last
    leg's text comes back, each output word linked to the source word its pivot word came from.
    The one step from results to placement: documents.translate_paragraphs (the Python API) and
    server/documents.translate_aligned (the service, one call per leg) both end here.

    Raises:
        ValueError: no leg, or legs of different lengths.
    """
    if not legs:
        raise ValueError("aligned_translations needs at least one leg of results")
    (first, subword), *pivots = legs
    aligned = [aligned_translation(result, subword=subword) for result in first]
    for results, subword in pivots:
        if len(results) != len(aligned):
            raise ValueError(f"a pivot leg of {len(results)} results for {len(aligned)} texts")
        aligned = [through_pivot(before, aligned_translation(result, subword=subword))
                   for before, result in zip(aligned, results)]
    return aligned


def _fold(char: str) -> str:
    lowered = char.lower()
    return lowered if len(lowered) == 1 else char


def locate(words: Sequence[str], text: str) -> list[tuple[int, int]]:
    """The character span [start, end) of each word in `text`, in order, matched by characters with
    whitespace ignored and case folded (a tokenizer may lowercase, normalize or cut the text). A
    word none of whose characters is found gets an empty span where the previous one ended."""
    positions = [i for i, char in enumerate(text) if not char.isspace()]
    chars = "".join(_fold(text[i]) for i in positions)
    owners = [k for k, word in enumerate(words) for char in word if not char.isspace()]
    wanted = "".join(_fold(char) for word in words for char in word if not char.isspace())
    if chars.startswith(wanted):  # the usual case (a cut input is a prefix)
        matched = list(range(len(wanted)))
    else:  # compared within a window: a tokenizer changes characters only locally
        matched = [-1] * len(wanted)
        window = chars[:4 * len(wanted) + 64]
        for a, b, size in SequenceMatcher(None, window, wanted, autojunk=False).get_matching_blocks():
            matched[b:b + size] = range(a, a + size)
    spans, end = [], 0
    found: list[list[int]] = [[] for _ in words]
    for owner, at in zip(owners, matched):
        if at >= 0:
            found[owner].append(positions[at])
    for hits in found:
        start = max(min(hits), end) if hits else end
        end = max(max(hits) + 1, start) if hits else end
        spans.append((start, end))
    return spans


def is_atom(node: PageElement) -> bool:
    """Kept whole wherever it is: comments, declarations, void and opaque elements."""
    if isinstance(node, PreformattedString):
        return True
    return isinstance(node, Tag) and (node.name in VOID or node.name in OPAQUE
                                      or str(node.get("translate", "")).strip().lower() == "no")


def is_inline(node: PageElement) -> bool:
    """Part of a sentence: text, an atom, or an INLINE element holding only inline content."""
    if isinstance(node, NavigableString) or is_atom(node):
        return True
    return isinstance(node, Tag) and node.name in INLINE and all(is_inline(child) for child in node.children)


@dataclass(eq=False)
class Literal:
    """Text kept exactly (a URL, a placeholder, inline code: protected.py), in `template`'s style
    (a format's run properties; None in HTML): an atom the model never reads."""

    text: str
    template: Any = None


@dataclass
class Span:
    """An element or atom inside a sentence, with its character span [start, end) in the
    sentence's source text (an atom's is empty: its text, if any, is not the model's to read).
    `node` is whatever the format renders it from (a Beautiful Soup tag, an lxml element, ...)."""

    node: Any
    start: int
    end: int
    atom: bool
    children: list[Span] = field(default_factory=list)


@dataclass
class Placed:
    """A span as placed in the translation: its node, and (an element's) content in order: output
    text (str) and the placed spans inside it."""

    node: Any
    atom: bool
    content: list[str | Placed]


def model_text(text: str, breaks: Sequence[int] = ()) -> str:
    """The text the model reads: whitespace collapsed, a space at each break position."""
    cuts = [0, *breaks, len(text)]
    return " ".join(" ".join(text[a:b] for a, b in zip(cuts, cuts[1:])).split())


@dataclass
class _Run:
    """One sentence: consecutive inline nodes of a block, their text and their elements."""

    parent: Tag
    nodes: list[PageElement]
    text: str
    items: list[Span]
    breaks: list[int]  # character positions of BREAKS elements in `text`

    @property
    def sentence(self) -> str:
        """The text the model reads: whitespace collapsed, a space at each break."""
        return model_text(self.text, self.breaks)


class _Text:
    """The text of a sentence as its nodes add to it, with its length so far."""

    def __init__(self):
        self.parts: list[str] = []
        self.length = 0
        self.breaks: list[int] = []  # where a BREAKS element separates words

    def add(self, piece: str) -> None:
        self.parts.append(piece)
        self.length += len(piece)


def _gather(nodes: Sequence[PageElement], text: _Text) -> list[Span]:
    """Add the text of `nodes` to `text`; return their elements and atoms with character spans."""
    items = []
    for node in nodes:
        start = text.length
        if is_atom(node):
            items.append(Span(node, start, start, atom=True))
            if isinstance(node, Tag) and node.name in BREAKS:
                text.breaks.append(start)
        elif isinstance(node, NavigableString):
            for part, kept in protected_parts(str(node)):
                if kept:
                    items.append(Span(Literal(part), text.length, text.length, atom=True))
                else:
                    text.add(part)
        else:
            children = _gather(list(node.children), text)
            items.append(Span(node, start, text.length, atom=False, children=children))
    return items


@dataclass
class _Placed:
    """An item placed in the output text: its character span there, and its children's."""

    item: Span
    start: int
    end: int
    children: list[_Placed] = field(default_factory=list)
    pre: str = ""  # text before it (a space the source had there)
    pad: str = ""  # text after it


def _visible(text: str, item: Span) -> bool:
    """Whether an element wraps text the model reads (an atom, an empty element, one holding
    only kept text: no)."""
    return not item.atom and item.end > item.start and not text[item.start:item.end].isspace()


WINDOW = 64  # rule 3 looks this many free words either side of an element's place for the nearest


class _Layout:
    """The placement of one sentence's items in its translation.

    The rules, in order:
    1. What stands before the first word of the source and after its last (whitespace, atoms,
       elements without words: a placeholder, a footnote mark, a trailing newline) is kept there,
       exactly: the output is that prefix, the translation, that suffix.
    2. An element goes around the output words aligned to the source words it wraps (siblings
       never overlap: a later one starts after an earlier one).
    3. An element that wraps words but got none (the model dropped them, or a sibling took them)
       goes around the nearest free output word: a link, a bold or coloured run is never emptied
       while the translation has a word for it (a sibling with two words gives one up).
    4. An atom (and an element without words) goes to the output boundary at its relative
       position among the source words, with the spaces it had on each side.
    """

    def __init__(self, text: str, items: list[Span], translation: AlignedTranslation):
        core_start = len(text) - len(text.lstrip())
        core_end = max(len(text.rstrip()), core_start)
        core = translation.text.strip()
        self.text = text
        self.out = text[:core_start] + core + text[core_end:]
        self.source = locate(translation.source_words, text)   # (n,) spans in text
        self.source_starts = [start for start, _ in self.source]
        self.source_ends = [end for _, end in self.source]
        self.target = locate(translation.target_words, self.out)   # (m,) spans in self.out
        self.shown = [end > start for start, end in self.target]   # a word located in the output text
        self.wordlike = [any(c.isalnum() for c in self.out[start:end]) for start, end in self.target]
        self.links: dict[int, list[int]] = {}
        for src, tgt in translation.alignment:
            if 0 <= tgt < len(self.target) and self.shown[tgt]:
                self.links.setdefault(src, []).append(tgt)
        edges, middle = [], []
        for item in items:  # rule 1: fixed before the first and after the last character of text
            fixed = not _visible(text, item)
            if fixed and item.end <= core_start:
                edges.append(self.edge(item, item.start))
            elif fixed and item.start >= core_end:
                edges.append(self.edge(item, core_start + len(core) + item.start - core_end))
            else:
                middle.append(item)
        placed = self.place(middle, 0, len(self.target), core_start, core_start + len(core))
        self.items = sorted(edges + placed, key=lambda p: (p.start, p.end))  # stable: source order on ties

    def edge(self, item: Span, offset: int) -> _Placed:
        children = [] if item.atom else [self.edge(child, offset) for child in item.children]
        return _Placed(item, offset, offset, children)

    def targets(self, item: Span, lo: int, hi: int) -> list[int]:
        """The output words in [lo, hi) linked to the source words that `item` wraps (those whose
        span overlaps the item's; spans are in order, so both ends are found by bisection)."""
        words = range(bisect_right(self.source_ends, item.start), bisect_left(self.source_starts, item.end))
        return sorted(t for i in words for t in self.links.get(i, ()) if lo <= t < hi)

    def boundary(self, item: Span) -> int:
        """The output boundary at the relative position of the item's start among the source words."""
        before = bisect_right(self.source_ends, item.start)  # the words that end before it starts
        return round(before * len(self.target) / len(self.source)) if self.source else 0

    def point_offset(self, item: Span, point: int, lo: int, hi: int, cend: int) -> int:
        """Where an item placed at output boundary `point` goes: right after the previous word when
        the source had no space before it ("Hund<br>"), else at the start of the next word."""
        spaced = item.start == 0 or self.text[item.start - 1].isspace()
        if not spaced and point > lo:
            return self.target[point - 1][1]
        return self.target[point][0] if point < hi else cend

    def spacing(self, item: Span, offset: int, glued: tuple[bool, bool] = (False, False)) -> tuple[str, str]:
        """Spaces around a point that the source had there and the output lacks: before it when it
        follows text, after it when a word follows ("a %s b" -> "A %s B", never "A%sB"); none
        around an element the translation had no word left for, nor between points that touch
        in the source (`glued`: the parts of a field, a placeholder and its tag)."""
        if _visible(self.text, item):
            return "", ""
        before = not glued[0] and 0 < item.start and self.text[item.start - 1].isspace()
        after = not glued[1] and item.end < len(self.text) and self.text[item.end].isspace()
        pre = " " if before and 0 < offset and not self.out[offset - 1].isspace() else ""
        pad = " " if after and offset < len(self.out) and self.out[offset].isalnum() else ""
        return pre, pad

    def claim(self, keyed: list, lo: int, hi: int) -> list[tuple[int, int] | None]:
        """Each item's range of output words (None: a point), by rules 2 and 3."""
        ranges: list[tuple[int, int] | None] = [None] * len(keyed)
        cursor = lo
        for k, (_, item, words) in enumerate(keyed):  # rule 2
            start = max(words[0], cursor) if words else hi
            if words and words[-1] >= start:
                ranges[k] = (start, words[-1] + 1)
                cursor = words[-1] + 1
        wanting = {k for k, (_, item, _) in enumerate(keyed) if ranges[k] is None and _visible(self.text, item)}
        gaps: dict[int, list[int]] = {}  # the ranged item before each wanting one (-1: none) -> them
        last = -1
        for k in range(len(keyed)):
            if ranges[k] is not None:
                last = k
            elif k in wanting:
                gaps.setdefault(last, []).append(k)
        after: list[int | None] = [None] * (len(keyed) + 1)  # the first ranged item from k on
        for k in range(len(keyed) - 1, -1, -1):
            after[k] = k if ranges[k] is not None else after[k + 1]
        for left, ks in gaps.items():  # rule 3
            right = after[ks[-1] + 1]
            free_lo = ranges[left][1] if left >= 0 else lo
            free_hi = ranges[right][0] if right is not None else hi
            free = [w for w in range(free_lo, free_hi) if self.shown[w]]
            while len(free) < len(ks):  # a neighbour with two words or more gives one up
                if left >= 0 and ranges[left][1] - ranges[left][0] > 1:
                    a, b = ranges[left]
                    ranges[left] = (a, b - 1)
                    free.insert(0, b - 1)
                elif right is not None and ranges[right][1] - ranges[right][0] > 1:
                    a, b = ranges[right]
                    ranges[right] = (a + 1, b)
                    free.append(a)
                else:
                    break
            taken = -1
            for j, k in enumerate(ks):
                first, last_room = taken + 1, len(free) - (len(ks) - j - 1)  # room for the ones after
                if first >= last_room:
                    break
                want = min(max(self.boundary(keyed[k][1]), free_lo), max(free_hi - 1, free_lo))
                near = min(max(bisect_left(free, want), first), last_room - 1)
                room = range(max(first, near - WINDOW), min(last_room, near + WINDOW + 1))  # the nearest words
                taken = min(room, key=lambda i: (not self.wordlike[free[i]], abs(free[i] - want), i))
                ranges[k] = (free[taken], free[taken] + 1)
        visible = [k for k, (_, item, _) in enumerate(keyed) if _visible(self.text, item)]
        if any(ranges[k] is None for k in visible) and len(visible) <= hi - lo:
            self.fit(keyed, ranges, visible, lo, hi)
        return ranges

    def fit(self, keyed: list, ranges: list, visible: list[int], lo: int, hi: int) -> None:
        """Rule 3 where no neighbour could give a word up (each holds one): every element gets
        words, in order, each range moved as little as it takes (the longest shortened first)."""
        wanted = []
        for k in visible:
            if ranges[k] is None:
                at = min(max(self.boundary(keyed[k][1]), lo), hi - 1)
                ranges[k] = (at, at + 1)
            wanted.append(list(ranges[k]))
        lengths = [b - a for a, b in wanted]
        longest = [(-length, k) for k, length in enumerate(lengths)]
        heapq.heapify(longest)
        for _ in range(sum(lengths) - (hi - lo)):  # the longest shortened first, a word at a time
            length, k = heapq.heappop(longest)
            lengths[k] -= 1
            heapq.heappush(longest, (length + 1, k))
        end = lo
        for span, length in zip(wanted, lengths):  # forward: after the one before
            span[0] = max(span[0], end)
            span[1] = span[0] + length
            end = span[1]
        start = hi
        for span, length in zip(reversed(wanted), reversed(lengths)):  # backward: before the one after
            span[1] = min(span[1], start)
            span[0] = span[1] - length
            start = span[0]
        for k, (a, b) in zip(visible, wanted):
            ranges[k] = (a, b)

    def place(self, items: list[Span], lo: int, hi: int, cstart: int, cend: int, *,
              spaced: bool = True) -> list[_Placed]:
        """Place `items` (siblings) within output words [lo, hi), characters [cstart, cend); points
        get the spaces they had (`spaced`: not inside a point, which has its own)."""
        point_like = [not _visible(self.text, item) for item in items]

        def touches(a: int, b: int) -> bool:  # items a and b (a before b) are points with nothing between
            return 0 <= a and b < len(items) and point_like[a] and point_like[b] and items[a].end == items[b].start

        glued = {id(item): (touches(k - 1, k), touches(k, k + 1)) for k, item in enumerate(items)}
        keyed = []
        for order, item in enumerate(items):
            words = self.targets(item, lo, hi) if _visible(self.text, item) else []
            first = words[0] if words else min(max(self.boundary(item), lo), hi)
            keyed.append(((first, 1 if words else 0, order), item, words))
        keyed.sort(key=lambda k: k[0])
        ranges = self.claim(keyed, lo, hi)
        following = [hi] * len(ranges)  # the first word of the next range: a point never passes it
        for k in range(len(ranges) - 2, -1, -1):
            following[k] = ranges[k + 1][0] if ranges[k + 1] is not None else following[k + 1]
        placed, cursor, pos = [], lo, cstart
        for (_, item, _), claimed, limit in zip(keyed, ranges, following):
            if claimed is not None and claimed[0] >= cursor:
                start, end = claimed
                chars = (max(self.target[start][0], pos), max(self.target[end - 1][1], pos))
                children = self.place(item.children, start, end, *chars)
                place = _Placed(item, chars[0], chars[1], children)
            else:  # rule 4: a point
                point = min(max(self.boundary(item), cursor), hi, max(limit, cursor))
                offset = max(self.point_offset(item, point, lo, hi, cend), pos)
                end, chars = point, (offset, offset)
                children = [] if item.atom else self.place(item.children, point, point, offset, offset, spaced=False)
                pads = self.spacing(item, offset, glued[id(item)]) if spaced else ("", "")
                place = _Placed(item, offset, offset, children, *pads)
            placed.append(place)
            cursor, pos = end, chars[1]
        return placed

    def content(self, placed: list[_Placed], cstart: int, cend: int) -> list[str | Placed]:
        """Characters [cstart, cend) of the output: text and the placed spans, each with its own
        placed content (atoms as they were)."""
        out: list[str | Placed] = []
        pos = cstart
        for place in placed:
            if place.start > pos:
                out.append(self.out[pos:place.start])
            if place.pre:
                out.append(place.pre)
            inner = [] if place.item.atom else self.content(place.children, place.start, place.end)
            out.append(Placed(place.item.node, place.item.atom, inner))
            if place.pad:
                out.append(place.pad)
            pos = max(pos, place.end)
        if cend > pos:
            out.append(self.out[pos:cend])
        return out


def place_spans(text: str, spans: list[Span], translation: AlignedTranslation) -> list[str | Placed]:
    """The translation of a sentence whose source `text` holds `spans`, as output text and placed
    spans (the one implementation of "put spans back by alignment": HTML here, documents/ for
    Word, PowerPoint, OpenDocument, XLIFF, PO and subtitles), by the rules of _Layout: what stands
    before the first word and after the last stays there, an element goes around its aligned
    words or, when it has none, the nearest free word, an atom at its relative place."""
    layout = _Layout(text, spans, translation)
    return layout.content(layout.items, 0, len(layout.out))


def _soup_nodes(content: list[str | Placed]) -> list[PageElement]:
    nodes: list[PageElement] = []
    for piece in content:
        if isinstance(piece, str):
            nodes.append(NavigableString(piece))
            continue
        if isinstance(piece.node, Literal):
            nodes.append(NavigableString(piece.node.text))
            continue
        if not piece.atom:
            piece.node.clear()
            for child in _soup_nodes(piece.content):
                piece.node.append(child)
        nodes.append(piece.node)
    return nodes


MAX_DEPTH = 128  # elements nested deeper are refused (the layout recurses once per level)


class TooDeep(ValueError):
    """HTML nested deeper than MAX_DEPTH (a limit, where the other refusals are about content)."""


def _depth(soup: BeautifulSoup) -> int:
    deepest, stack = 0, [(soup, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, Tag))
    return deepest


class MarkupDocument:
    """An HTML fragment or document split into sentences; `render(translations)` gives it back
    with each sentence translated and its markup placed (once: it rewrites the parsed tree).

    Raises:
        TooDeep: elements nested deeper than MAX_DEPTH. ValueError: a DOCTYPE with declarations
            (an internal subset: entities), refused as in every XML part (safety.parse_xml); its
            `]>` would otherwise be read as text.
    """

    def __init__(self, html: str):
        self.soup = BeautifulSoup(html, "html.parser", multi_valued_attributes=None)
        for doctype in self.soup.find_all(string=lambda node: isinstance(node, Doctype)):
            if "[" in doctype:
                raise ValueError("its DOCTYPE declares an internal subset (entities or other declarations "
                                 "between [ and ]): refused, as a document does not need them")
        depth = _depth(self.soup)
        if depth > MAX_DEPTH:
            raise TooDeep(f"the HTML nests elements {depth} deep; at most {MAX_DEPTH} are read")
        self.runs: list[_Run] = []
        self._collect(self.soup)
        self._rendered = False

    @property
    def sentences(self) -> list[str]:
        """The text of each sentence, whitespace collapsed, in document order."""
        return [run.sentence for run in self.runs]

    def _collect(self, block: Tag) -> None:
        run: list[PageElement] = []
        for child in list(block.children):
            if is_inline(child):
                run.append(child)
                continue
            self._add_run(block, run)
            run = []
            self._collect(child)
        self._add_run(block, run)

    def _add_run(self, block: Tag, nodes: list[PageElement]) -> None:
        text = _Text()
        items = _gather(nodes, text)
        joined = "".join(text.parts)
        if has_letters(joined):  # numbers, dates, punctuation and kept text alone stay as they are
            self.runs.append(_Run(block, list(nodes), joined, items, text.breaks))

    def render(self, translations: Sequence[AlignedTranslation]) -> str:
        """The document with each sentence replaced by its translation, markup placed.

        Raises:
            ValueError: not one translation per sentence, or a second call.
        """
        if len(translations) != len(self.runs):
            raise ValueError(f"{len(translations)} translations for {len(self.runs)} sentences")
        if self._rendered:
            raise ValueError("a MarkupDocument renders once")
        self._rendered = True
        for run, translation in zip(self.runs, translations):
            nodes = _soup_nodes(place_spans(run.text, run.items, translation))
            index = run.parent.index(run.nodes[0])
            for node in run.nodes:
                node.extract()
            for offset, node in enumerate(nodes):
                run.parent.insert(index + offset, node)
        return self.soup.decode(formatter="minimal")


def translate_html(html: str, translate: Callable[[list[str]], Sequence[AlignedTranslation]]) -> str:
    """`html` with its text translated by `translate` (sentences -> their AlignedTranslations)."""
    document = MarkupDocument(html)
    return document.render(list(translate(document.sentences)) if document.runs else [])
