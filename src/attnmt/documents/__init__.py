"""Documents translated with their structure kept: .txt, .html, .docx, .pptx, .odt, .odp, .epub,
.srt, .po, .xliff in the same format; .pdf in, .txt out.

    from attnmt import Translator
    from attnmt.documents import translate_file
    data, suffix = translate_file(Translator.load("runs/demo"), "report.docx")   # bytes of the translated .docx

    document = read_document(data, ".docx", name="report.docx")   # parsed, checked (safety.py)
    document.sentences                                            # the paragraphs the model reads
    document.render(aligned_translations)                         # bytes of the same format

Every format turns its paragraphs into units whose inline formatting (runs, links, tags,
placeholders) markup.place_spans puts back by word alignment; what each format keeps and
translates: docs/serving.md ("Documents"); what is refused and why: docs/reliability.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Protocol, Sequence

from attnmt.decoding.options import DecodingOptions
from attnmt.documents.safety import DocumentError, DocumentTooLarge, Limits, check_kind
from attnmt.markup import AlignedTranslation, aligned_translation

SUFFIXES = (".txt", ".html", ".docx", ".pptx", ".odt", ".odp", ".epub", ".srt", ".po", ".xliff", ".pdf")
ALIASES = {".htm": ".html", ".xlf": ".xliff", ".pot": ".po"}
OUTPUT_SUFFIX = {".pdf": ".txt"}
__all__ = ["SUFFIXES", "Document", "DocumentError", "DocumentTooLarge", "Limits", "normalize_suffix",
           "read_document", "translate_document", "translate_paragraphs", "translate_file"]


class Document(Protocol):
    sentences: list[str]

    def render(self, translations: Sequence[AlignedTranslation]) -> bytes: ...


def normalize_suffix(suffix: str, name: str = "the file") -> str:
    """A file's suffix as one of SUFFIXES (.htm -> .html, .xlf -> .xliff, .pot -> .po).

    Raises:
        DocumentError: a suffix that is not a document format, naming the ones that are.
    """
    suffix = suffix.lower()
    suffix = ALIASES.get(suffix, suffix)
    if suffix not in SUFFIXES:
        raise DocumentError(f"{name}: {suffix or 'a file without an extension'} is not supported: "
                            f"send {', '.join(SUFFIXES)}")
    return suffix


def output_suffix(suffix: str) -> str:
    """The suffix of the translation of a `suffix` file (.pdf -> .txt; else the same)."""
    return OUTPUT_SUFFIX.get(suffix, suffix)


def read_document(data: bytes, suffix: str, *, name: str = "the file", limits: Limits = Limits(),
                  target_lang: str | None = None) -> Document:
    """`data` parsed as a `suffix` document, within `limits`; `target_lang` goes into the formats
    that record it (.po's Language, XLIFF's target language).

    Raises:
        DocumentError: a file that is not what its suffix says, is corrupt or encrypted, or that
            cannot be read (naming the file and the part, line or entry); DocumentTooLarge: over `limits`.
    """
    suffix = normalize_suffix(suffix, name)
    check_kind(data, suffix, name)
    if suffix in (".docx", ".pptx", ".odt", ".odp"):
        from attnmt.documents.office import OfficeDocument
        return OfficeDocument(data, suffix, name, limits)
    if suffix == ".epub":
        from attnmt.documents.epub import EpubDocument
        return EpubDocument(data, name, limits)
    if suffix == ".srt":
        from attnmt.documents.subtitles import SubtitleDocument
        return SubtitleDocument(data, name, limits)
    if suffix in (".po", ".xliff"):
        from attnmt.documents.localization import PoDocument, XliffDocument
        return (PoDocument if suffix == ".po" else XliffDocument)(data, name, limits, target_lang)
    from attnmt.documents.plain import HtmlDocument, PdfDocument, TextDocument
    return {".txt": TextDocument, ".html": HtmlDocument, ".pdf": PdfDocument}[suffix](data, name, limits)


def translate_document(data: bytes, suffix: str, translate: Callable[[list[str]], Sequence[AlignedTranslation]], *,
                       name: str = "the file", limits: Limits = Limits(), target_lang: str | None = None) -> bytes:
    """`data` (a `suffix` document) with its paragraphs translated by `translate` (paragraphs ->
    their AlignedTranslations), in the same format (.pdf: .txt)."""
    document = read_document(data, suffix, name=name, limits=limits, target_lang=target_lang)
    sentences = document.sentences
    return document.render(list(translate(sentences)) if sentences else [])


def translate_paragraphs(translator, paragraphs: Sequence[str], options: DecodingOptions | None = None
                         ) -> list[AlignedTranslation]:
    """THE call that sends a document's paragraphs to the model (Python API and CLI; the service's
    twin is server/documents.translate_aligned, whose TranslationService always splits): each
    paragraph is translated sentence by sentence and comes back as one result whose text,
    attention and alignment cover the whole paragraph, which is all the placement needs."""
    options = DecodingOptions.of(options, alignments=True, split_sentences=True)
    results = translator.translate(list(paragraphs), options)
    return [aligned_translation(result, subword=translator.subword) for result in results]


def translate_file(translator, source: str | os.PathLike | bytes, options: DecodingOptions | None = None, *,
                   suffix: str | None = None, limits: Limits = Limits(), **keywords) -> tuple[bytes, str]:
    """A document file (a path, or its bytes with `suffix`) translated by `translator`
    as `options` (or their fields as keywords: beam_size, source_lang, target_lang, ...) say; the
    bytes of the translation and their suffix (.pdf -> .txt).

    Raises:
        DocumentError: as read_document, or a file that cannot be read.
    """
    if isinstance(source, bytes):
        if suffix is None:
            raise ValueError("suffix is needed with bytes (e.g. suffix='.docx')")
        data, name = source, f"the {suffix} file"
    else:
        path = Path(source)
        name = str(path)
        suffix = suffix or path.suffix
        try:
            data = path.read_bytes()
        except OSError as err:
            raise DocumentError(f"{path}: cannot read it ({err.strerror or err})") from None
    suffix = normalize_suffix(suffix, name)
    options = DecodingOptions.of(options, **keywords)
    target = options.target_lang or getattr(translator.cfg.data, "tgt_lang", None)
    translated = translate_document(data, suffix, lambda paragraphs: translate_paragraphs(translator, paragraphs, options),
                                    name=name, limits=limits, target_lang=target)
    return translated, output_suffix(suffix)
