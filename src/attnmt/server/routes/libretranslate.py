"""LibreTranslate's API: POST /translate (JSON or form body) and GET /languages.

Request and response shapes, messages and status codes follow LibreTranslate's app.py, so its
clients work unchanged: missing parameters, unknown languages and formats get 400, a wrong API
key 403, a fault inside the model 500, each as {"error": "..."}. Where attnmt's rules differ:
an empty `q` string translates to an empty string (LibreTranslate says "missing q"), more texts
than --max-texts get 413, and a cut input adds a `warnings` field.
"""

from __future__ import annotations

import asyncio
from fastapi import APIRouter, Depends, Request
from pydantic import ValidationError

from attnmt.server.errors import ApiError
from attnmt.server.bodies import read_body
from attnmt.server.models import ModelSet
from attnmt.server.routes.deps import get_detector, get_models
from attnmt.server.schemas import (ErrorResponse, Language, LibreTranslateRequest, LibreTranslateResponse,
                                   libretranslate_body_schema)
from attnmt.server.settings import MAX_BEAM

router = APIRouter(tags=["LibreTranslate"])

ERRORS = {400: {"model": ErrorResponse, "description": "Invalid request"},
          403: {"model": ErrorResponse, "description": "Invalid API key"},
          429: {"model": ErrorResponse, "description": "Over --req-limit requests a minute"},
          413: {"model": ErrorResponse, "description": "Body over 1 MiB, or more texts than --max-texts"},
          500: {"model": ErrorResponse, "description": "Translation error (a fault inside the model)"}}

_FORM_BODY = libretranslate_body_schema(form=True, max_alternatives=MAX_BEAM - 1)
_BODY_DOC = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": libretranslate_body_schema(form=False, max_alternatives=MAX_BEAM - 1)},
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
    if alternatives > MAX_BEAM - 1:
        raise ApiError(400, f"Invalid request: alternatives parameter must be <= {MAX_BEAM - 1}")
    batch = isinstance(body.q, list)
    texts = body.q if batch else [body.q]
    models.check_texts(texts)
    if body.source == "auto":
        detected = await detect_sources(request, models, texts, body.target)
        sources = [d["language"] for d in detected]
    else:
        models.route(body.source, body.target)
        sources = [body.source] * len(texts)
    text_format = body.format or "text"
    if text_format != "text":
        raise ApiError(400, f"{text_format} format is not supported: this server translates plain text")

    results: list = [None] * len(texts)
    for source in dict.fromkeys(sources):  # one call per source language (one, unless auto)
        service = models.route(source, body.target)
        settings = service.settings_for(beam_size=max(service.beam_size, alternatives + 1), n_best=alternatives + 1)
        where = [i for i, s in enumerate(sources) if s == source]
        for i, result in zip(where, await service.translate([texts[i] for i in where], settings)):
            results[i] = result

    def others(result) -> list[str]:  # alternatives without the best and without repeats
        seen, out = {result.text}, []
        for alt in result.alternatives[1:]:
            if alt.text not in seen:
                seen.add(alt.text)
                out.append(alt.text)
        return out

    answer = LibreTranslateResponse(translatedText=[r.text for r in results] if batch else results[0].text)
    if alternatives:
        answer.alternatives = [others(r) for r in results] if batch else others(results[0])
    if body.source == "auto":
        answer.detectedLanguage = detected if batch else detected[0]
    if any(r.warnings for r in results):
        answer.warnings = [r.warnings for r in results] if batch else results[0].warnings
    return answer


async def detect_sources(request: Request, models: ModelSet, texts: list[str], target: str) -> list[dict]:
    """`source: auto`: per text, {confidence, language} among the languages the server translates
    into `target` from (400 naming the pairs when none does). One such language needs no guess."""
    candidates = models.sources_into(target)
    if not candidates:
        raise ApiError(400, f"{target} is not supported: {models.describe_pairs()}")
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
