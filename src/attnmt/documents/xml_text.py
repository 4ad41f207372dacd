"""Paragraphs of XML formats as pieces (paragraphs.py), and their translations written back.

Two shapes of XML hold a paragraph's text:
- runs (Office Open XML: Word's w:p, DrawingML's a:p in slides): the paragraph is a list of runs,
  each with its properties (rPr) and its text (t); links and tracked insertions wrap runs.
  `RunDialect`, `run_unit`.
- mixed content (OpenDocument's text:p, XLIFF's source/target): text and inline elements
  interleaved, as in HTML. `MixedDialect`, `mixed_unit`. ODF's text:span is read as Word's runs
  are (a style each: LibreOffice wraps every run in one), links and XLIFF's codes as groups.

Only text is rewritten: paragraph properties, fields (their code, and every result but a
HYPERLINK's), drawings and text boxes (moved, never copied: their own paragraphs are units of
their own), bookmarks, footnote marks, tabs and breaks are kept (as atoms, placed at their
relative position); the runs' properties are copied onto the runs that carry the translated text.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, Callable

from lxml import etree

from attnmt.documents.paragraphs import Group, Literal, Piece, Styled, Unit, atom, build_unit, group, text
from attnmt.documents.safety import DocumentTooLarge
from attnmt.documents.markup import Placed

XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
CODE_STYLE = re.compile(r"code|verbatim|preformatted|source|monospace", re.IGNORECASE)
MONO_FONTS = frozenset({"courier", "courier new", "consolas", "menlo", "monaco", "lucida console",
                        "dejavu sans mono", "liberation mono", "source code pro", "fira code", "fira mono"})


def local(element: Any) -> str:
    return etree.QName(element).localname if isinstance(element.tag, str) else ""


def namespace(element: Any) -> str | None:
    return etree.QName(element).namespace if isinstance(element.tag, str) else None


def _too_deep(depth: int, limit: int, where: str) -> None:
    if depth > limit:
        raise DocumentTooLarge(f"{where}: elements nested more than {limit} deep inside a paragraph; refused")


# ---- runs (Office Open XML) ---------------------------------------------------------------------

@dataclass(frozen=True)
class RunDialect:
    """Where a run-based format keeps a paragraph's parts (local names in namespace `ns`)."""

    ns: str
    properties: str = "rPr"                   # a run's properties
    text: str = "t"                           # a run's text
    first: frozenset = frozenset({"pPr"})     # paragraph children kept first
    last: frozenset = frozenset()             # ... and last (DrawingML's endParaRPr)
    groups: frozenset = frozenset()           # paragraph children wrapping runs (links, insertions)
    dropped: frozenset = frozenset()          # markers dropped (spelling marks, rendered page breaks)
    breaks: frozenset = frozenset()           # run or paragraph children that separate words
    key_ignores: frozenset = frozenset()      # properties (attributes / children) that do not split styles
    preserve_space: bool = False              # text elements need xml:space="preserve"
    code: Callable[[Any], bool] = lambda props: False
    skip: Callable[[Any], bool] = lambda paragraph: False

    def q(self, name: str) -> str:
        return f"{{{self.ns}}}{name}"


W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"


def _word_code(props) -> bool:
    if props is None:
        return False
    style = props.find(f"{{{W}}}rStyle")
    fonts = props.find(f"{{{W}}}rFonts")
    return bool((style is not None and CODE_STYLE.search(style.get(f"{{{W}}}val", ""))) or
                (fonts is not None and fonts.get(f"{{{W}}}ascii", "").lower() in MONO_FONTS))


def _word_skip(paragraph) -> bool:
    style = paragraph.find(f"{{{W}}}pPr/{{{W}}}pStyle")
    return style is not None and bool(CODE_STYLE.search(style.get(f"{{{W}}}val", "")))


def _drawing_code(props) -> bool:
    latin = props.find(f"{{{A}}}latin") if props is not None else None
    return latin is not None and latin.get("typeface", "").lower() in MONO_FONTS


WORD = RunDialect(W, groups=frozenset({"hyperlink", "ins", "smartTag", "fldSimple", "customXml", "dir", "bdo"}),
                  dropped=frozenset({"proofErr", "lastRenderedPageBreak"}), breaks=frozenset({"tab", "br", "cr"}),
                  key_ignores=frozenset({"lang", "noProof", "rtl"}), preserve_space=True, code=_word_code,
                  skip=_word_skip)
DRAWING = RunDialect(A, first=frozenset({"pPr"}), last=frozenset({"endParaRPr"}), breaks=frozenset({"br"}),
                     key_ignores=frozenset({"lang", "altLang", "dirty", "err", "noProof", "smtClean", "smtId"}),
                     code=_drawing_code)


@dataclass(eq=False)
class RunPart:
    """A run's part that is not its text (a tab, a break, a drawing, a text box, a field
    character, a footnote mark): written back as a run of its own with the run's properties.
    The part itself is moved there, never copied, so that paragraphs inside it (a text box's)
    keep the translation their own units write."""

    props: Any
    part: Any


def _style_key(props, dialect: RunDialect) -> bytes:
    """Run properties as a key: runs whose keys are equal are one style (language and spelling
    marks ignored)."""
    if props is None:
        return b""
    kept = copy.deepcopy(props)
    for name in list(kept.attrib):
        if etree.QName(name).localname in dialect.key_ignores:
            del kept.attrib[name]
    for child in list(kept):
        if local(child) in dialect.key_ignores:
            kept.remove(child)
    kept.tail = None
    return etree.tostring(kept, method="c14n")


def _new_run(dialect: RunDialect, template, *children) -> Any:
    run = etree.Element(dialect.q("r"))
    if template is not None:
        run.append(copy.deepcopy(template))
    for child in children:
        run.append(child)
    return run


def _text_element(dialect: RunDialect, value: str) -> Any:
    element = etree.Element(dialect.q(dialect.text))
    element.text = value
    if dialect.preserve_space:
        element.set(XML_SPACE, "preserve")
    return element


class _Fields:
    """Word's complex fields (w:fldChar begin / w:instrText / separate / end) open around the runs
    being read: a field's result (a page number, a date, a cross-reference) is the field's to
    compute, kept exactly; a HYPERLINK field's result is the text a reader sees, translated."""

    def __init__(self):
        self.open: list[list[str]] = []  # the instruction text of each field open, outer first

    def keeps_text(self) -> bool:
        return any(not "".join(instruction).strip().upper().startswith("HYPERLINK") for instruction in self.open)

    def read(self, part, dialect: RunDialect) -> None:
        name = local(part)
        if name == "fldChar":
            kind = part.get(dialect.q("fldCharType"))
            if kind == "begin":
                self.open.append([])
            elif kind == "end" and self.open:
                self.open.pop()
        elif name == "instrText" and self.open:
            self.open[-1].append(part.text or "")


def _simple_field_kept(element, dialect: RunDialect) -> bool:
    """A w:fldSimple other than a HYPERLINK: its result is kept whole."""
    return local(element) == "fldSimple" and not (element.get(dialect.q("instr")) or "").strip().upper().startswith(
        "HYPERLINK")


def run_pieces(parent, dialect: RunDialect, depth: int, limit: int, where: str,
               fields: _Fields | None = None) -> list[Piece]:
    """The pieces of a paragraph (or of a group inside one). Nothing in the tree is changed."""
    _too_deep(depth, limit, where)
    fields = fields if fields is not None else _Fields()
    pieces: list[Piece] = []
    for child in parent:
        name = local(child)
        if namespace(child) != dialect.ns:
            pieces.append(atom(child))  # a comment, math, alternate content: kept whole
        elif name in dialect.first or name in dialect.last or name in dialect.dropped:
            continue
        elif name == "r":
            props = child.find(dialect.q(dialect.properties))
            key, code = _style_key(props, dialect), dialect.code(props)
            for part in child:
                part_name = local(part)
                if part is props or (namespace(part) == dialect.ns and part_name in dialect.dropped):
                    continue
                if namespace(part) == dialect.ns and part_name == dialect.text:
                    value = part.text or ""
                    if code or fields.keeps_text():
                        pieces.append(atom(Literal(value, props)))
                    elif value:
                        pieces.append(text(value, key, props))
                else:  # a tab, a break, a drawing, a field character, a footnote mark: its own run
                    fields.read(part, dialect)
                    pieces.append(atom(RunPart(props, part), breaks=part_name in dialect.breaks))
        elif name in dialect.groups and not _simple_field_kept(child, dialect):
            pieces.append(group(child, run_pieces(child, dialect, depth + 1, limit, where, fields)))
        else:
            pieces.append(atom(child, breaks=name in dialect.breaks))
    return pieces


def _runs(content: list[str | Placed], base, dialect: RunDialect) -> list[Any]:
    out: list[Any] = []
    last: tuple[Any, Any] | None = None  # (template, text element) of the run just made from text
    for piece in content:
        if isinstance(piece, str):
            if not piece:
                continue
            if last is not None and last[0] is base:
                last[1].text += piece
                continue
            element = _text_element(dialect, piece)
            out.append(_new_run(dialect, base, element))
            last = (base, element)
            continue
        last = None
        node = piece.node
        if isinstance(node, Styled):
            out.extend(_runs(piece.content, node.template, dialect))
        elif isinstance(node, Literal):
            out.append(_new_run(dialect, node.template, _text_element(dialect, node.text)))
        elif isinstance(node, RunPart):
            out.append(_new_run(dialect, node.props, node.part))  # moves the part out of its old run
        elif isinstance(node, Group):
            for child in list(node.element):
                node.element.remove(child)
            node.element.extend(_runs(piece.content, node.base, dialect))
            out.append(node.element)
        else:
            out.append(node)
    return out


def run_unit(paragraph, dialect: RunDialect, *, limit: int, where: str) -> Unit | None:
    """The unit of a run-based paragraph (None: nothing to translate, or a code paragraph)."""
    if dialect.skip(paragraph):
        return None
    pieces = run_pieces(paragraph, dialect, 0, limit, where)

    def write(content: list[str | Placed], base) -> None:
        first = [c for c in paragraph if namespace(c) == dialect.ns and local(c) in dialect.first]
        last = [c for c in paragraph if namespace(c) == dialect.ns and local(c) in dialect.last]
        for child in list(paragraph):
            paragraph.remove(child)
        paragraph.extend(first + _runs(content, base, dialect) + last)

    return build_unit(pieces, write, styled=True)


# ---- mixed content (OpenDocument, XLIFF) --------------------------------------------------------

@dataclass(frozen=True)
class MixedDialect:
    """Which inline elements of a mixed-content format wrap text (groups: a link, an XLIFF code),
    style the text they wrap (styles: ODF's text:span, read as runs are in Word: the style of
    most characters is the level's base, each stretch of another is placed as one span), separate
    words (breaks) or stand for spaces; every other element is an atom. Qualified names."""

    groups: frozenset
    styles: frozenset = frozenset()
    breaks: frozenset = frozenset()
    spaces: str | None = None        # ODF's <text:s text:c="N"/>: N spaces
    spaces_count: str | None = None
    code: Callable[[Any], bool] = lambda element: False


def _chain_key(chain: tuple) -> tuple:
    """The style of text inside the styling elements `chain` (outer first): their tags and attributes."""
    return tuple((element.tag, tuple(sorted(element.attrib.items()))) for element in chain)


def mixed_pieces(element, dialect: MixedDialect, depth: int, limit: int, where: str,
                 chain: tuple = ()) -> list[Piece]:
    """The pieces of a mixed-content element; text inside styling elements (`chain`, outer first)
    carries their style. Nothing in the tree is changed."""
    _too_deep(depth, limit, where)
    pieces: list[Piece] = []
    key = _chain_key(chain)

    def add(value: str) -> None:
        pieces.append(text(value, key, chain))

    if element.text:
        add(element.text)
    for child in element:
        tag = child.tag if isinstance(child.tag, str) else None
        if tag is not None and tag == dialect.spaces:
            try:
                count = min(max(int(child.get(dialect.spaces_count, "1")), 1), 1000)
            except ValueError:
                count = 1
            add(" " * count)
        elif tag in dialect.breaks:
            pieces.append(atom(child, breaks=True))
        elif tag in dialect.styles and not dialect.code(child):
            pieces.extend(mixed_pieces(child, dialect, depth + 1, limit, where, chain + (child,)))
        elif tag in dialect.groups and not dialect.code(child):
            pieces.append(group(child, mixed_pieces(child, dialect, depth + 1, limit, where, chain)))
        else:
            pieces.append(atom(child))
        if child.tail:
            add(child.tail)
    return pieces


def fill_mixed(element, content: list[str | Placed], base: tuple | None = None) -> None:
    """Replace `element`'s text and children by placed content (its attributes and tail kept):
    plain text in the styling elements of `base` (the level's base style), a Styled stretch in
    its own, each written as new copies of those elements (their attributes, not their text)."""
    for child in list(element):
        element.remove(child)
    element.text = None
    state = {"last": None, "wrapper": None}  # the node written last; the (chain, innermost) text goes into

    def add(value: str, chain: tuple) -> None:
        if not value:
            return
        wrapper = state["wrapper"]
        if chain and wrapper is not None and wrapper[0] == chain:
            wrapper[1].text = (wrapper[1].text or "") + value
            return
        if chain:
            outer = inner = etree.SubElement(element, chain[0].tag, dict(chain[0].attrib))
            for styling in chain[1:]:
                inner = etree.SubElement(inner, styling.tag, dict(styling.attrib))
            inner.text = value
            state["last"], state["wrapper"] = outer, (chain, inner)
        elif state["last"] is None:
            element.text = (element.text or "") + value
        else:
            state["last"].tail = (state["last"].tail or "") + value

    def place(node) -> None:
        node.tail = None
        element.append(node)
        state["last"], state["wrapper"] = node, None

    def write(pieces: list[str | Placed], chain: tuple) -> None:
        for piece in pieces:
            if isinstance(piece, str):
                add(piece, chain)
            elif isinstance(piece.node, Literal):
                add(piece.node.text, piece.node.template or ())
            elif isinstance(piece.node, Styled):
                write(piece.content, piece.node.template or ())
            elif isinstance(piece.node, Group):
                fill_mixed(piece.node.element, piece.content, piece.node.base)
                place(piece.node.element)
            else:
                place(piece.node)

    write(content, base or ())


def mixed_unit(element, dialect: MixedDialect, *, limit: int, where: str) -> Unit | None:
    """The unit of a mixed-content element (None: nothing to translate), written back into it."""
    pieces = mixed_pieces(element, dialect, 0, limit, where)
    return build_unit(pieces, lambda content, base: fill_mixed(element, content, base), styled=True)
