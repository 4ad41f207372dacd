"""Texts with a structure, translated through the served models: HTML (`format: "html"` and .html
files, placed by markup.py from word alignments), plain-text files (line by line) and the
document formats of attnmt.documents (.docx, .pptx, .odt, .odp, .epub, .srt, .po, .xliff, .pdf).

    outputs, warnings = await translate_html_texts(models, texts, sources, "en", max_sentences=1000)
    data = await translate_document(models, decode_upload(raw_bytes), ".txt", "de", "en", max_sentences=1000)
    document = await read_upload(raw_bytes, ".docx", "en", file_limit_bytes=512_000)   # 400 / 413 if refused
    data = await translate_parsed(models, document, "de", "en", max_sentences=1000)

Every sentence of a request goes to the model in one call per source language; more sentences
than `max_sentences` get 413 before any is translated.
"""

from __future__ import annotations

import asyncio
from typing import Sequence

from attnmt.documents import Document, DocumentError, DocumentTooLarge, Limits, read_document
from attnmt.markup import AlignedTranslation, MarkupDocument, aligned_translation, through_pivot
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
    to the model (documents.translate_paragraphs is the Python API's); TranslationService splits
    each paragraph into sentences."""
    aligned: list = [None] * len(sentences)
    warnings: list = [[] for _ in sentences]
    for source in dict.fromkeys(sources):
        legs, _ = models.legs(source, target)  # a direction no model has: through a pivot language
        where = [i for i, s in enumerate(sources) if s == source]
        current = [sentences[i] for i in where]
        for leg, service in enumerate(legs):
            results = await service.translate(current, service.options_for(alignments=True))
            for i, result in zip(where, results):
                made = aligned_translation(result, subword=service.translator.subword)
                aligned[i] = made if leg == 0 else through_pivot(aligned[i], made)
                warnings[i] += result.warnings
            current = [r.text for r in results]
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


async def translate_lines(models: ModelSet, text: str, source: str, target: str, *, max_sentences: int) -> str:
    """Plain text translated line by line: every line kept, empty ones as they are, and each
    line's leading and trailing whitespace (a "\\r" included) around its translation."""
    lines = text.split("\n")
    todo = [i for i, line in enumerate(lines) if line.strip()]
    check_sentences(len(todo), max_sentences)
    legs, _ = models.legs(source, target)  # a direction no model has: through a pivot language
    texts = [lines[i].strip() for i in todo]
    for service in legs:
        texts = [r.text for r in await service.translate(texts, service.options_for())]
    for i, translation in zip(todo, texts):
        line = lines[i]
        lines[i] = line[:len(line) - len(line.lstrip())] + translation + line[len(line.rstrip()):]
    return "\n".join(lines)


def decode_upload(data: bytes) -> str:
    """An uploaded file's text (UTF-8, a byte-order mark dropped); 400 when it is empty or not UTF-8."""
    if not data.strip():
        raise ApiError(400, "Invalid request: the file is empty")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ApiError(400, f"Invalid request: the file is not valid UTF-8 (byte 0x{data[err.start]:02x} at "
                            f"offset {err.start})") from None


async def translate_document(models: ModelSet, text: str, suffix: str, source: str, target: str, *,
                             max_sentences: int) -> bytes:
    """The text of an uploaded .txt or .html file translated, as UTF-8 bytes."""
    if suffix == ".html":
        outputs, _ = await translate_html_texts(models, [text], [source], target, max_sentences=max_sentences,
                                                label="the file")
        return outputs[0].encode("utf-8")
    return (await translate_lines(models, text, source, target, max_sentences=max_sentences)).encode("utf-8")


async def read_upload(data: bytes, suffix: str, target: str, *, file_limit_bytes: int) -> Document:
    """An uploaded document parsed within the service's limits (documents.Limits.for_upload);
    a refusal is a 400 naming the part at fault, a limit a 413."""
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
