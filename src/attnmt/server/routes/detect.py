"""LibreTranslate's POST /detect: the language of a text, among those the server translates from.

    curl -s localhost:8000/detect -d 'q=Zwei Hunde spielen im Schnee .'
    # [{"confidence":99.9,"language":"de"},{"confidence":0.1,"language":"en"}]
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, Request

from attnmt.server.bodies import read_model
from attnmt.server.langid import LanguageDetector
from attnmt.server.api_errors import ApiError
from attnmt.server.routing import ModelSet
from attnmt.server.routes.deps import get_detector, get_models
from attnmt.server.routes.libretranslate import ERRORS
from attnmt.server.schemas import DetectedLanguage, DetectRequest, text_fields_body_doc

router = APIRouter(tags=["LibreTranslate"])

_BODY_DOC = text_fields_body_doc({"q": "the text whose language to find",
                                  "api_key": "needed when the server runs with --api-key"}, required=["q"])


@router.post("/detect", response_model=list[DetectedLanguage], responses=ERRORS, openapi_extra=_BODY_DOC)
async def detect(request: Request, models: ModelSet = Depends(get_models),
                 detector: LanguageDetector = Depends(get_detector)) -> list[DetectedLanguage]:
    """The languages the server translates from, most likely first, with confidence in percent."""
    body = await read_model(request, DetectRequest)
    models.check_access(request, body.api_key)
    if not body.q or not body.q.strip():
        raise ApiError(400, "Invalid request: missing q parameter")
    ranked = await asyncio.to_thread(detector.detect, body.q)
    if not ranked:
        raise ApiError(400, f"Invalid request: cannot recognize {', '.join(models.sources)}")
    return [DetectedLanguage(**item) for item in ranked]
