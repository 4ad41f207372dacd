"""The document formats, one row each: the one table every list of formats derives from.

    fmt = format_of(".htm", "page.htm")   # the .html row; DocumentError naming the formats otherwise
    fmt.media_type                        # "text/html; charset=utf-8": what /download_file answers
    fmt.output_suffix                     # ".html" (the .pdf row: ".txt")
    document = fmt.read(data, "page.htm", Limits(), ReadSettings(target_lang="en"))   # check_kind, then its reader

A row holds a format's suffix, its other spellings, its media type, the kind its bytes must be
(a zip archive, a PDF: safety.check_kind refuses anything else before the reader runs), the
suffix of its translation, its reader and whether it carries review marks (review.py).
Derived here: SUFFIXES, ALIASES, OUTPUT_SUFFIX, REVIEWED, normalize_suffix, output_suffix; read
by documents.read_document, the service (upload suffixes, /download_file's media types, the
OpenAPI description of /translate_file, /frontend/settings, the file store's names) and
commands/document_files.py (which `-i` files are documents).
A new format is one row here and its reader's module, as fairseq registers one entry per task.

Each reader imports its module when it is called, so `import attnmt.documents` loads no format's
code or library (Beautiful Soup, srt, lxml, pypdf).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

from attnmt.documents.localization import Existing
from attnmt.documents.review import check_review_below
from attnmt.documents.safety import PDF, ZIP, DocumentError, Limits, check_kind

if TYPE_CHECKING:
    from attnmt.documents.markup import AlignedTranslation

__all__ = ["ALIASES", "FORMATS", "OUTPUT_SUFFIX", "REVIEWED", "SUFFIXES", "Document", "Format", "ReadSettings",
           "check_reviews", "find_format", "format_of", "normalize_suffix", "output_suffix"]


class Document(Protocol):
    """A parsed document: the paragraphs the model reads, and its bytes with their translations."""

    sentences: list[str]

    def render(self, translations: Sequence[AlignedTranslation]) -> bytes: ...


@dataclass(frozen=True)
class ReadSettings:
    """What a reader is told besides the bytes.

    Attributes:
        target_lang: the language translated into, for the formats that record it (.po's empty
            Language, XLIFF's target-language / trgLang).
        existing: what happens to translations the file already holds (.po, XLIFF: kept unless
            Existing(retranslate=True); localization.py).
        review_below: a translation less confident than this gets its format's review mark
            (review.py; the formats whose row `reviews`); None: no marks.

    Raises:
        ValueError: review_below out of 0..1, naming it.
    """

    target_lang: str | None = None
    existing: Existing = Existing()
    review_below: float | None = None

    def __post_init__(self):
        if self.target_lang is not None and not isinstance(self.target_lang, str):
            raise TypeError(f"ReadSettings.target_lang must be a language code or None, not {self.target_lang!r}")
        if not isinstance(self.existing, Existing):
            raise TypeError(f"ReadSettings.existing must be a localization.Existing, not {self.existing!r}")
        check_review_below(self.review_below)


Reader = Callable[[bytes, str, Limits, ReadSettings], Document]  # (data, name, limits, settings)


@dataclass(frozen=True)
class Format:
    """One document format.

    Attributes:
        suffix: its extension, lower case (".docx").
        media_type: what the service sends it as (/download_file's Content-Type).
        reader: (data, name, limits, settings) -> Document (settings: ReadSettings, the target
            language and the policy for existing translations).
        aliases: other spellings of the suffix (".htm").
        kind: what its bytes must be (safety.ZIP, safety.PDF; None: text, checked by decoding).
        output: the suffix of its translation when that is another format's (.pdf -> ".txt").
        reviews: it marks low-confidence translations for review (ReadSettings.review_below; review.py).
    """

    suffix: str
    media_type: str
    reader: Reader
    aliases: tuple[str, ...] = ()
    kind: str | None = None
    output: str | None = None
    reviews: bool = False

    @property
    def zipped(self) -> bool:
        return self.kind == ZIP

    @property
    def output_suffix(self) -> str:
        return self.output or self.suffix

    def read(self, data: bytes, name: str = "the file", limits: Limits = Limits(),
             settings: ReadSettings = ReadSettings()) -> Document:
        """`data` parsed as this format within `limits` (see documents.read_document).

        Raises:
            ValueError: settings.review_below for a format without review marks (check_reviews).
        """
        check_reviews(self, settings.review_below, name, error=ValueError)
        check_kind(data, self.suffix, name, kind=self.kind)
        return self.reader(data, name, limits, settings)


# ---- the readers: each imports its module when a document is read ----------------------------------

def _text(data: bytes, name: str, limits: Limits, settings: ReadSettings) -> Document:
    from attnmt.documents.plain import TextDocument
    return TextDocument(data, name, limits)


def _html(data: bytes, name: str, limits: Limits, settings: ReadSettings) -> Document:
    from attnmt.documents.plain import HtmlDocument
    return HtmlDocument(data, name, limits)


def _pdf(data: bytes, name: str, limits: Limits, settings: ReadSettings) -> Document:
    from attnmt.documents.plain import PdfDocument
    return PdfDocument(data, name, limits)


def _office(suffix: str) -> Reader:
    def read(data: bytes, name: str, limits: Limits, settings: ReadSettings) -> Document:
        from attnmt.documents.office import OfficeDocument
        return OfficeDocument(data, suffix, name, limits, review_below=settings.review_below)
    return read


def _epub(data: bytes, name: str, limits: Limits, settings: ReadSettings) -> Document:
    from attnmt.documents.epub import EpubDocument
    return EpubDocument(data, name, limits)


def _srt(data: bytes, name: str, limits: Limits, settings: ReadSettings) -> Document:
    from attnmt.documents.subtitles import SubtitleDocument
    return SubtitleDocument(data, name, limits)


def _po(data: bytes, name: str, limits: Limits, settings: ReadSettings) -> Document:
    from attnmt.documents.po import PoDocument
    return PoDocument(data, name, limits, settings.target_lang, settings.existing, review_below=settings.review_below)


def _xliff(data: bytes, name: str, limits: Limits, settings: ReadSettings) -> Document:
    from attnmt.documents.xliff import XliffDocument
    return XliffDocument(data, name, limits, settings.target_lang, settings.existing,
                         review_below=settings.review_below)


_OOXML = "application/vnd.openxmlformats-officedocument"
_ODF = "application/vnd.oasis.opendocument"

FORMATS: tuple[Format, ...] = (
    Format(".txt", "text/plain; charset=utf-8", _text),
    Format(".html", "text/html; charset=utf-8", _html, aliases=(".htm",)),
    Format(".docx", f"{_OOXML}.wordprocessingml.document", _office(".docx"), kind=ZIP, reviews=True),
    Format(".pptx", f"{_OOXML}.presentationml.presentation", _office(".pptx"), kind=ZIP),
    Format(".odt", f"{_ODF}.text", _office(".odt"), aliases=(".ott", ".oth", ".odm"), kind=ZIP, reviews=True),
    Format(".odp", f"{_ODF}.presentation", _office(".odp"), aliases=(".otp",), kind=ZIP),
    Format(".epub", "application/epub+zip", _epub, kind=ZIP),
    Format(".srt", "application/x-subrip; charset=utf-8", _srt),
    Format(".po", "text/x-gettext-translation", _po, aliases=(".pot",), reviews=True),  # in its header's charset
    Format(".xliff", "application/xliff+xml; charset=utf-8", _xliff, aliases=(".xlf",), reviews=True),
    Format(".pdf", "application/pdf", _pdf, kind=PDF, output=".txt"),
)

SUFFIXES = tuple(fmt.suffix for fmt in FORMATS)
REVIEWED = tuple(fmt.suffix for fmt in FORMATS if fmt.reviews)  # the formats that carry review marks
ALIASES = {alias: fmt.suffix for fmt in FORMATS for alias in fmt.aliases}
OUTPUT_SUFFIX = {fmt.suffix: fmt.output for fmt in FORMATS if fmt.output}
_BY_SUFFIX = {spelling: fmt for fmt in FORMATS for spelling in (fmt.suffix, *fmt.aliases)}


def find_format(suffix: str) -> Format | None:
    """The row of `suffix` (any case, or an alias), or None when it is no document format."""
    return _BY_SUFFIX.get(suffix.lower())


def format_of(suffix: str, name: str = "the file") -> Format:
    """The row of `suffix` (any case, or an alias).

    Raises:
        DocumentError: a suffix that is not a document format, naming the ones that are.
    """
    fmt = find_format(suffix)
    if fmt is None:
        raise DocumentError(f"{name}: {suffix.lower() or 'a file without an extension'} is not supported: "
                            f"send {', '.join(SUFFIXES)}")
    return fmt


def normalize_suffix(suffix: str, name: str = "the file") -> str:
    """A file's suffix as one of SUFFIXES (.htm -> .html, .xlf -> .xliff, .pot -> .po).

    Raises:
        DocumentError: as format_of.
    """
    return format_of(suffix, name).suffix


def check_reviews(fmt: Format, review_below: float | None, name: str = "the file", *,
                  setting: str = "review_below", error: type[Exception] = ValueError) -> None:
    """Refuse review marks asked of a format that has none (a file without marks would read as
    one whose every translation is sure); `setting` is how the caller's user spells it.

    Raises:
        error: "review_below: a.html is a .html document, which carries no review marks (.docx, ...)".
    """
    if review_below is not None and not fmt.reviews:
        raise error(f"{setting}: {name} is a {fmt.suffix} document, which carries no review marks "
                    f"(they are written in {', '.join(REVIEWED)})")


def output_suffix(suffix: str) -> str:
    """The suffix of the translation of a `suffix` file (.pdf -> .txt; else the same, normalized).

    Raises:
        DocumentError: as format_of.
    """
    return format_of(suffix).output_suffix
