"""Documents translated with their structure kept: .txt, .html, .docx, .pptx, .odt, .odp, .epub,
.srt, .po, .xliff in the same format; .pdf in, .txt out (the table of formats: formats.py).

    from attnmt import Translator
    from attnmt.documents import translate_file
    data, suffix = translate_file(Translator.load("runs/demo"), "report.docx")   # bytes of the translated .docx

    document = read_document(data, ".docx", name="report.docx")   # parsed, checked (safety.py)
    read_document(po, ".po", target_lang="en", retranslate=True)  # existing translations too (localization.py)
    translate_file(translator, "app.po", review_below=0.5)        # less sure than 0.5: marked for review (review.py)
    document.sentences                                            # the paragraphs the model reads
    document.render(aligned_translations)                         # bytes of the same format

Every format turns its paragraphs into units whose inline formatting (runs, links, tags,
placeholders) markup.place_spans puts back by word alignment; what each format keeps and
translates: docs/serving.md ("Documents"); what is refused and why: docs/reliability.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from attnmt.decoding.options import DecodingOptions
from attnmt.documents.formats import (ALIASES, FORMATS, OUTPUT_SUFFIX, REVIEWED, SUFFIXES, Document, Format,
                                      ReadSettings, check_reviews, find_format, format_of, normalize_suffix,
                                      output_suffix)
from attnmt.documents.localization import Existing
from attnmt.documents.safety import DocumentError, DocumentTooLarge, Limits

if TYPE_CHECKING:
    from attnmt.documents.markup import AlignedTranslation

__all__ = ["ALIASES", "FORMATS", "OUTPUT_SUFFIX", "REVIEWED", "SUFFIXES", "Document", "DocumentError",
           "DocumentTooLarge", "Existing", "Format", "Limits", "ReadSettings", "check_reviews", "find_format",
           "format_of", "normalize_suffix", "output_suffix", "read_document", "translate_document",
           "translate_paragraphs", "translate_file"]


def read_document(data: bytes, suffix: str, *, name: str = "the file", limits: Limits = Limits(),
                  target_lang: str | None = None, retranslate: bool = False,
                  review_below: float | None = None) -> Document:
    """`data` parsed as a `suffix` document, within `limits`; `target_lang` goes into the formats
    that record it (.po's empty Language, XLIFF's target language); translations a .po or XLIFF
    file already holds are kept, unless `retranslate` (localization.py: machine output is marked
    for review either way); a translation less confident than `review_below` gets its format's
    review mark (review.py: .docx, .odt, .po, .xliff; None: none).

    Raises:
        DocumentError: a file that is not what its suffix says, is corrupt or encrypted, or that
            cannot be read (naming the file and the part, line or entry); DocumentTooLarge: over `limits`.
        ValueError: review_below out of 0..1, or given for a format without review marks, naming it.
    """
    settings = ReadSettings(target_lang, Existing(retranslate=retranslate), review_below)
    return format_of(suffix, name).read(data, name, limits, settings)


def translate_document(data: bytes, suffix: str, translate: Callable[[list[str]], Sequence[AlignedTranslation]], *,
                       name: str = "the file", limits: Limits = Limits(), target_lang: str | None = None,
                       retranslate: bool = False, review_below: float | None = None) -> bytes:
    """`data` (a `suffix` document) with its paragraphs translated by `translate` (paragraphs ->
    their AlignedTranslations, whose confidence the review marks read), in the same format (.pdf: .txt)."""
    document = read_document(data, suffix, name=name, limits=limits, target_lang=target_lang, retranslate=retranslate,
                             review_below=review_below)
    sentences = document.sentences
    return document.render(list(translate(sentences)) if sentences else [])


def translate_paragraphs(translator, paragraphs: Sequence[str], options: DecodingOptions | None = None
                         ) -> list[AlignedTranslation]:
    """THE call that sends a document's paragraphs to the model (Python API and CLI): each
    paragraph is translated sentence by sentence and comes back as one result whose text,
    attention and alignment cover the whole paragraph, which is all the placement needs. The
    results become AlignedTranslations in markup.aligned_translations, as the service's
    (server/documents.translate_aligned, one call per leg when a pivot language joins two models)."""
    from attnmt.documents.markup import aligned_translations

    options = DecodingOptions.of(options, alignments=True, split_sentences=True)
    results = translator.translate(list(paragraphs), options)
    return aligned_translations([(results, translator.subword)])


def translate_file(translator, source: str | os.PathLike | bytes, options: DecodingOptions | None = None, *,
                   suffix: str | None = None, limits: Limits = Limits(), retranslate: bool = False,
                   review_below: float | None = None, **keywords) -> tuple[bytes, str]:
    """A document file (a path, or its bytes with `suffix`) translated by `translator`
    as `options` (or their fields as keywords: beam_size, source_lang, target_lang, ...) say; the
    bytes of the translation and their suffix (.pdf -> .txt). A .po's or XLIFF's existing
    translations are kept unless `retranslate`; a paragraph less confident than `review_below`
    is marked for review (read_document).

    Raises:
        DocumentError: as read_document, or a file that cannot be read.
        ValueError: as read_document (before the model translates).
    """
    if isinstance(source, bytes):
        if suffix is None:
            raise ValueError("suffix is needed with bytes (e.g. suffix='.docx')")
        data, name = source, f"the {suffix} file"
    else:
        path = Path(source)
        name = str(path)
        suffix = suffix or path.suffix
        from attnmt.untrusted import read_input

        # a regular file only (no FIFO, device, /dev/zero through a link), within what a document may unpack to
        data = read_input(path, limit=limits.max_unpacked_bytes, error=DocumentError, too_large=DocumentTooLarge,
                          what="a document (its Limits.max_unpacked_bytes)")
    fmt = format_of(suffix, name)
    options = DecodingOptions.of(options, **keywords)
    target = options.target_lang or getattr(translator.cfg.data, "tgt_lang", None)
    translated = translate_document(data, fmt.suffix, lambda paragraphs: translate_paragraphs(translator, paragraphs, options),
                                    name=name, limits=limits, target_lang=target, retranslate=retranslate,
                                    review_below=review_below)
    return translated, fmt.output_suffix
