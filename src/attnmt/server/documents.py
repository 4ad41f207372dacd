"""Texts with a structure, translated through the served models: HTML (`format: "html"`, placed
by documents/markup.py from word alignments) and uploaded files of every format of
attnmt.documents (.txt line by line, .html, .docx, .pptx, .odt, .odp, .epub, .srt, .po, .xliff,
.pdf: one path for all, the table of documents/formats.py).

    outputs, warnings = await translate_html_texts(models, texts, sources, "en", max_sentences=1000)
    document = await read_upload(raw_bytes, ".docx", "en", file_limit_bytes=512_000)   # 400 / 413 if refused
    data = await translate_parsed(models, document, "de", "en", max_sentences=1000)

Every sentence of a request goes to the model in one call per source language (and leg, through
a pivot language); more sentences than `max_sentences` get 413 before any is translated.
"""

from __future__ import annotations

import asyncio
from typing import Sequence

from attnmt.documents import Document, DocumentError, DocumentTooLarge, Limits, read_document
from attnmt.documents.markup import AlignedTranslation, MarkupDocument, aligned_translations
from attnmt.server.api_errors import ApiError
from attnmt.server.routing import ModelSet


def check_sentences(count: int, limit: int) -> None:
    """413 when a request holds more than `limit` sentences."""
    if count > limit:
        raise ApiError(413, f"Invalid request: {count} sentences exceed the limit of {limit} (--max-sentences)")


async def translate_aligned(models: ModelSet, sentences: Sequence[str], sources: Sequence[str],
                            target: str) -> tuple[list[AlignedTranslation], list[list[str]]]:
    """Each sentence translated from its source language into `target`, with its word alignment;
    and each one's warnings (an input cut). The service's call that sends a document's paragraphs
    to the model: one call per source language and leg (a direction no model has goes through a
    pivot language), each paragraph split into sentences (TranslationService.options_for); the
    legs' results become AlignedTranslations in markup.aligned_translations, as the Python API's
    (documents.translate_paragraphs)."""
    aligned: list = [None] * len(sentences)
    warnings: list = [[] for _ in sentences]
    for source in dict.fromkeys(sources):
        legs, _ = models.legs(source, target)
        where = [i for i, s in enumerate(sources) if s == source]
        current = [sentences[i] for i in where]
        done = []  # (results, subword) per leg
        for service in legs:
            results = await service.translate(current, service.options_for(alignments=True))
            done.append((results, service.translator.subword))
            for i, result in zip(where, results):
                warnings[i] += result.warnings
            current = [r.text for r in results]
        for i, made in zip(where, aligned_translations(done)):
            aligned[i] = made
    return aligned, warnings


def parse_html(texts: Sequence[str], label: str) -> list[MarkupDocument]:
    """Each text as a MarkupDocument; 400 naming the text (`label`, indexed when several) that
    cannot be read."""
    documents = []
    for i, text in enumerate(texts):
        try:
            documents.append(MarkupDocument(text))
        except Exception as err:  # the parser's or markup's refusal of this input
            where = f"{label}[{i}]" if len(texts) > 1 else label
            raise ApiError(400, f"Invalid request: {where} is not HTML that can be translated: {err}") from None
    return documents


async def translate_html_texts(models: ModelSet, texts: Sequence[str], sources: Sequence[str], target: str, *,
                               max_sentences: int, label: str = "q") -> tuple[list[str], list[list[str]]]:
    """Each HTML text translated with its markup kept, and the warnings of its sentences."""
    documents = await asyncio.to_thread(parse_html, texts, label)
    check_sentences(sum(len(d.sentences) for d in documents), max_sentences)
    sentences = [s for d in documents for s in d.sentences]
    owners = [source for d, source in zip(documents, sources) for _ in d.sentences]
    aligned, warnings = await translate_aligned(models, sentences, owners, target)

    def render() -> tuple[list[str], list[list[str]]]:
        outputs, notes, start = [], [], 0
        for document in documents:
            end = start + len(document.sentences)
            outputs.append(document.render(aligned[start:end]))
            notes.append(list(dict.fromkeys(w for ws in warnings[start:end] for w in ws)))
            start = end
        return outputs, notes

    return await asyncio.to_thread(render)


async def read_upload(data: bytes, suffix: str, target: str, *, file_limit_bytes: int) -> Document:
    """An uploaded document of any format parsed within the service's limits
    (documents.Limits.for_upload) by its row of documents.formats, text decoded once (UTF-8,
    plain.decode_text); a refusal (empty, not UTF-8, not what its suffix says, corrupt) is a 400
    naming the part at fault, a limit a 413."""
    def read() -> Document:
        return read_document(data, suffix, name="the file", limits=Limits.for_upload(file_limit_bytes),
                             target_lang=target)
    try:
        return await asyncio.to_thread(read)
    except DocumentTooLarge as err:
        raise ApiError(413, f"Invalid request: {err}") from None
    except DocumentError as err:
        raise ApiError(400, f"Invalid request: {err}") from None


async def translate_parsed(models: ModelSet, document: Document, source: str, target: str, *,
                           max_sentences: int) -> bytes:
    """A parsed document's paragraphs translated in one model call with alignments, rendered back
    into its format."""
    sentences = document.sentences
    check_sentences(len(sentences), max_sentences)
    aligned, _ = await translate_aligned(models, sentences, [source] * len(sentences), target) if sentences else ([], [])
    try:
        return await asyncio.to_thread(document.render, aligned)
    except DocumentError as err:  # the formats check everything on reading; this is a last guard
        raise ApiError(400, f"Invalid request: {err}") from None
