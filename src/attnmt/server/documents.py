"""Texts with a structure, translated through the served models: HTML (`format: "html"`, placed
by documents/markup.py from word alignments) and uploaded files of every format of
attnmt.documents (.txt line by line, .html, .docx, .pptx, .odt, .odp, .epub, .srt, .po, .xliff,
.pdf: one path for all, the table of documents/formats.py).

    outputs, warnings = await translate_html_texts(models, texts, sources, "en", max_sentences=1000)
    document = await read_upload(raw_bytes, ".docx", "en", file_limit_bytes=512_000)   # 400 / 413 if refused
    data, warnings = await translate_parsed(models, document, "de", "en", max_sentences=1000)

Uploaded documents are read and written back one at a time, in a thread of their own (`LANE`):
a document that is slow to read (a PDF of many pages) holds that one thread, never the pool the
rest of the service uses, and at most DOCUMENTS_WAITING more wait their turn (then 503); one
whose client has left is dropped before its turn comes (server/limits.py cancels its request).
How much one document may hold (pages, parts, paragraphs) is documents.Limits'.

Every paragraph (an HTML block, a document's paragraph) of a request is split into sentences by
the first leg's service, all of them counted before any is translated: more than `max_sentences`
get 413 (TranslationService.split). They go to the model in one call per source language (and
leg, through a pivot language), in the micro-batcher's turns with every other request.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

from attnmt.documents import Document, DocumentError, DocumentTooLarge, Limits, read_document
from attnmt.documents.markup import AlignedTranslation, MarkupDocument, aligned_translations
from attnmt.server.api_errors import ApiError
from attnmt.server.routing import ModelSet

DOCUMENTS_WAITING = 4  # uploads waiting for the document thread while one is read; more get 503


class DocumentLane:
    """One thread for reading and rendering uploads, and a bound on how many wait for it."""

    def __init__(self, waiting: int = DOCUMENTS_WAITING):
        self.limit = waiting
        self.queued = 0  # in the lane: the one being worked on and those waiting
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnmt-documents")

    async def run(self, work: Callable):
        """`work()` in the document thread; 503 when the lane is full. Cancelled while it waits
        (the client left), it never runs."""
        if self.queued > self.limit:
            raise ApiError(503, f"The server is busy reading {self.queued} documents; try again in a moment")
        self.queued += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, work)
        finally:
            self.queued -= 1


LANE = DocumentLane()


async def translate_aligned(models: ModelSet, sentences: Sequence[str], sources: Sequence[str],
                            target: str, *, max_sentences: int | None = None
                            ) -> tuple[list[AlignedTranslation], list[list[str]]]:
    """Each sentence translated from its source language into `target`, with its word alignment;
    and each one's warnings (an input cut). The service's call that sends a document's paragraphs
    to the model: one call per source language and leg (a direction no model has goes through a
    pivot language), each paragraph split into sentences (TranslationService.options_for); the
    legs' results become AlignedTranslations in markup.aligned_translations, as the Python API's
    (documents.translate_paragraphs). More than `max_sentences` sentences in all: 413 before any work."""
    aligned: list = [None] * len(sentences)
    warnings: list = [[] for _ in sentences]
    groups, counted = [], 0
    for source in dict.fromkeys(sources):
        legs, _ = models.legs(source, target)
        where = [i for i, s in enumerate(sources) if s == source]
        spans = await legs[0].sentences([sentences[i] for i in where], limit=max_sentences, counted=counted)
        counted += sum(map(len, spans))
        groups.append((legs, where, spans))
    for legs, where, spans in groups:
        current = [sentences[i] for i in where]
        done = []  # (results, subword) per leg
        for leg, service in enumerate(legs):
            results = await service.translate(current, service.options_for(alignments=True),
                                              spans=spans if leg == 0 else None)
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
    sentences = [s for d in documents for s in d.sentences]
    owners = [source for d, source in zip(documents, sources) for _ in d.sentences]
    aligned, warnings = await translate_aligned(models, sentences, owners, target, max_sentences=max_sentences)

    def render() -> tuple[list[str], list[list[str]]]:
        outputs, notes, start = [], [], 0
        for document in documents:
            end = start + len(document.sentences)
            outputs.append(document.render(aligned[start:end]))
            notes.append(list(dict.fromkeys(w for ws in warnings[start:end] for w in ws)))
            start = end
        return outputs, notes

    return await asyncio.to_thread(render)


async def read_upload(data: bytes, suffix: str, target: str, *, file_limit_bytes: int,
                      retranslate: bool = False, review_below: float | None = None) -> Document:
    """An uploaded document of any format parsed within the service's limits
    (documents.Limits.for_upload) by its row of documents.formats, text decoded once (UTF-8,
    plain.decode_text), its paragraphs less confident than `review_below` to be marked for review
    (documents/review.py); a refusal (empty, not UTF-8, not what its suffix says, corrupt) is a 400
    naming the part at fault, a limit a 413."""
    def read() -> Document:
        return read_document(data, suffix, name="the file", limits=Limits.for_upload(file_limit_bytes),
                             target_lang=target, retranslate=retranslate, review_below=review_below)
    try:
        return await LANE.run(read)
    except DocumentTooLarge as err:
        raise ApiError(413, f"Invalid request: {err}") from None
    except DocumentError as err:
        raise ApiError(400, f"Invalid request: {err}") from None


async def translate_parsed(models: ModelSet, document: Document, source: str, target: str, *,
                           max_sentences: int) -> tuple[bytes, list[str]]:
    """A parsed document's paragraphs translated with alignments (at most `max_sentences`
    sentences: 413), rendered back into its format; and the warnings of its sentences (an input
    cut), each said once."""
    sentences = document.sentences
    aligned, warnings = (await translate_aligned(models, sentences, [source] * len(sentences), target,
                                                 max_sentences=max_sentences) if sentences else ([], []))
    try:
        data = await LANE.run(lambda: document.render(aligned))
    except DocumentError as err:  # the formats check everything on reading; this is a last guard
        raise ApiError(400, f"Invalid request: {err}") from None
    return data, list(dict.fromkeys(w for ws in warnings for w in ws))
