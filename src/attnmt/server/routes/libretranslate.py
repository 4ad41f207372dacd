"""LibreTranslate's API: POST /translate (JSON or form body) and GET /languages.

Request and response shapes, messages and status codes follow LibreTranslate's app.py, so its
clients work unchanged: missing parameters, unknown languages and formats get 400, a wrong API
key 403, a fault inside the model 500, each as {"error": "..."}. Where attnmt's rules differ:
an empty `q` string translates to an empty string (LibreTranslate says "missing q"), more texts
than --max-texts or more sentences than --max-sentences (all texts' together, counted before any is
translated) get 413, a cut input adds a `warnings` field, and a plain text's answer adds
`confidence` (how likely each translation is to be good) and, with alternatives,
`alternativeConfidence` (each one's): keys a LibreTranslate client ignores.
`serve --min-confidence` answers the source instead of a less confident translation, with a
warning. `format: "html"` keeps the markup (documents/markup.py), without alternatives.
"""

from __future__ import annotations

import asyncio
from fastapi import APIRouter, Depends, Request
from pydantic import ValidationError

from attnmt.bounds import BEAM
from attnmt.server.bodies import read_body
from attnmt.server.documents import parse_html, translate_html_texts
from attnmt.server.api_errors import ApiError
from attnmt.server.routing import ModelSet
from attnmt.server.routes.deps import get_detector, get_models
from attnmt.server.schemas import (DetectedLanguage, ErrorResponse, Language, LibreTranslateRequest, LibreTranslateResponse,
                                   libretranslate_body_schema)

router = APIRouter(tags=["LibreTranslate"])

FORMATS = ("text", "html")  # html: documents/markup.py keeps the tags, placed by the model's word alignment
MAX_ALTERNATIVES = BEAM.high - 1  # alternatives besides the translation: the rest of the widest beam

ERRORS = {400: {"model": ErrorResponse, "description": "Invalid request"},
          403: {"model": ErrorResponse, "description": "Invalid API key"},
          429: {"model": ErrorResponse, "description": "Over --req-limit requests a minute"},
          413: {"model": ErrorResponse, "description": "Body over 1 MiB, or more texts than --max-texts"},
          500: {"model": ErrorResponse, "description": "Translation error (a fault inside the model)"}}

_FORM_BODY = libretranslate_body_schema(form=True, max_alternatives=MAX_ALTERNATIVES)
_BODY_DOC = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": libretranslate_body_schema(form=False, max_alternatives=MAX_ALTERNATIVES)},
    "application/x-www-form-urlencoded": {"schema": _FORM_BODY},
    "multipart/form-data": {"schema": _FORM_BODY}}}}


def _parse(data: dict) -> LibreTranslateRequest:
    try:
        return LibreTranslateRequest.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        name = str(first["loc"][0]) if first.get("loc") else "body"
        if first.get("type") == "extra_forbidden":
            raise ApiError(400, f"Invalid request: unknown parameter {name}") from None
        if name == "alternatives":
            raise ApiError(400, "Invalid request: alternatives parameter is not a number") from None
        if name == "q":
            raise ApiError(400, "Invalid request: q must be a string or a list of strings") from None
        raise ApiError(400, f"Invalid request: {name} must be a string") from None


@router.post("/translate", response_model=LibreTranslateResponse, response_model_exclude_none=True,
             responses=ERRORS, openapi_extra=_BODY_DOC)
async def translate(request: Request, models: ModelSet = Depends(get_models)):
    """Translate text from a language to another (LibreTranslate's request and response); the
    model is the one for source -> target, and `source: auto` picks it per text."""
    body = _parse(await read_body(request))
    models.check_access(request, body.api_key)
    for name in ("q", "source", "target"):
        value = getattr(body, name)
        if value is None or (name != "q" and not value):
            raise ApiError(400, f"Invalid request: missing {name} parameter")
    alternatives = body.alternatives or 0
    if alternatives < 0:
        raise ApiError(400, "Invalid request: alternatives parameter must be >= 0")
    if alternatives > MAX_ALTERNATIVES:
        raise ApiError(400, f"Invalid request: alternatives parameter must be <= {MAX_ALTERNATIVES}")
    batch = isinstance(body.q, list)
    texts = body.q if batch else [body.q]
    models.check_texts(texts)
    text_format = body.format or "text"
    detected = await _detect(request, models, body, texts, html=text_format == "html")
    sources = [d["language"] for d in detected] if detected is not None else [body.source] * len(texts)
    if text_format not in FORMATS:
        raise ApiError(400, f"{text_format} format is not supported: use {' or '.join(FORMATS)}")
    if text_format == "html":
        if alternatives:
            raise ApiError(400, "Invalid request: alternatives are not available with format html")
        translated, warnings = await translate_html_texts(models, texts, sources, body.target,
                                                          max_sentences=models.default.settings.max_sentences)
        others: list[list[str]] = [[] for _ in texts]
        pivots = [models.legs(source, body.target)[1] for source in sources]  # tags placed through the pivot too
        confidences, others_sure = None, []
    else:
        translated, others, warnings, pivots, confidences, others_sure = await translate_plain(
            models, texts, sources, body.target, alternatives, max_sentences=models.default.settings.max_sentences)

    answer = LibreTranslateResponse(translatedText=translated if batch else translated[0])
    if alternatives:
        answer.alternatives = others if batch else others[0]
        if confidences is not None and any(c is not None for c in confidences):
            answer.alternativeConfidence = others_sure if batch else others_sure[0]
    if detected is not None:
        languages = [DetectedLanguage(**d) for d in detected]
        answer.detectedLanguage = languages if batch else languages[0]
    if any(warnings):
        answer.warnings = warnings if batch else warnings[0]
    if confidences is not None and any(c is not None for c in confidences):
        answer.confidence = confidences if batch else confidences[0]
    if any(pivots):  # each text's own (a list for a list q): with source auto, texts of several languages
        answer.pivot = pivots if batch else pivots[0]
    return answer


async def _detect(request: Request, models: ModelSet, body: LibreTranslateRequest, texts: list[str], *,
                  html: bool) -> list[dict] | None:
    """With `source: auto`, each text's language (of its text without tags, for HTML); otherwise
    None, once the pair is known to be served."""
    if body.source != "auto":
        models.legs(body.source, body.target)  # directly or through a pivot; 400 when nothing joins them
        return None
    readable = [" ".join(d.sentences) for d in await asyncio.to_thread(parse_html, texts, "q")] if html else texts
    return await detect_sources(request, models, readable, body.target)


async def translate_plain(models: ModelSet, texts: list[str], sources: list[str], target: str,
                          alternatives: int, *, max_sentences: int | None = None
                          ) -> tuple[list[str], list[list[str]], list[list[str]], list[str | None], list[float | None],
                                     list[list[float | None]]]:
    """Plain texts translated (one call per source language; a direction no model has goes
    through a pivot, two calls): their translations, the distinct alternatives of each (without
    the best; of the last leg), each one's warnings, each one's pivot language (None: none), its
    confidence and each alternative's (through a pivot: the lower leg's).
    More than `max_sentences` sentences in all (the first legs' count) get 413 before any work."""
    results: list = [None] * len(texts)
    notes: list[list[str]] = [[] for _ in texts]
    pivots: list[str | None] = [None for _ in texts]
    confidences: list[float | None] = [None for _ in texts]
    floors: list[float | None] = [None for _ in texts]  # a pivot's first leg's confidence
    groups, counted = [], 0
    for source in dict.fromkeys(sources):  # one call per source language (one, unless auto)
        legs, pivot = models.legs(source, target)
        where = [i for i, s in enumerate(sources) if s == source]
        current = [texts[i] for i in where]
        spans = await legs[0].sentences(current, limit=max_sentences, counted=counted)  # all counted before any work
        counted += sum(map(len, spans))
        groups.append((legs, pivot, where, current, spans))
    for legs, pivot, where, current, spans in groups:
        for i in where:
            pivots[i] = pivot
        for leg, service in enumerate(legs):
            last = leg == len(legs) - 1
            n_best = alternatives + 1 if last else 1
            options = service.options_for(beam_size=max(service.beam_size, n_best), n_best=n_best,
                                          **({} if last else {"min_confidence": 0.0}))  # a pivot's first leg: never withheld
            found = await service.translate(current, options, spans=spans if leg == 0 else None)
            for i, result in zip(where, found):
                notes[i] += result.warnings
                if not last:
                    floors[i] = _lower(floors[i], result.confidence)
            current = [r.text for r in found]
        for i, result in zip(where, found):
            results[i] = result
            confidences[i] = _lower(floors[i], result.confidence)

    def others(i: int) -> tuple[list[str], list[float | None]]:  # alternatives without the best and repeats
        seen, texts, sure = {results[i].text}, [], []
        for alt in results[i].alternatives[1:]:
            if alt.text not in seen:
                seen.add(alt.text)
                texts.append(alt.text)
                sure.append(_lower(floors[i], alt.confidence))
        return texts, sure

    alternatives_found = [others(i) for i in range(len(texts))]
    return ([r.text for r in results], [a for a, _ in alternatives_found], notes, pivots, confidences,
            [c for _, c in alternatives_found])


def _lower(floor: float | None, confidence: float | None) -> float | None:
    """A translation through a pivot is as sure as its less sure leg (None: not known)."""
    return confidence if floor is None else floor if confidence is None else min(floor, confidence)


async def detect_sources(request: Request, models: ModelSet, texts: list[str], target: str) -> list[dict]:
    """`source: auto`: per text, {confidence, language} among the languages the server translates
    into `target` from (400 naming the pairs when none does). One such language needs no guess."""
    candidates = models.sources_into(target)
    if not candidates:
        raise ApiError(400, f"{target} is not supported: {models.describe_directions()}")
    if len(candidates) == 1:
        return [{"confidence": 100.0, "language": candidates[0]} for _ in texts]
    detector = get_detector(request)
    detected = []
    for text in texts:
        ranked = await asyncio.to_thread(detector.detect, text, candidates)
        if not ranked:
            raise ApiError(400, f"Invalid request: cannot recognize {', '.join(candidates)}; name the source")
        detected.append(ranked[0])
    return detected


@router.get("/languages", response_model=list[Language])
async def languages(models: ModelSet = Depends(get_models)) -> list[Language]:
    """The languages the server reads and writes, with the targets each translates to."""
    return [Language(**language) for language in models.languages()]
