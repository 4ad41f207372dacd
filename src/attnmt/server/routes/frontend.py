"""LibreTranslate's GET /frontend/settings (what its web page asks first) and POST /suggest (a
user's better translation, logged with --suggestions FILE; off without it, as LibreTranslate)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from attnmt.server.bodies import read_model
from attnmt.server.api_errors import ApiError
from attnmt.documents import ALIASES, SUFFIXES
from attnmt.server.routing import ModelSet
from attnmt.server.routes.deps import get_models
from attnmt.server.routes.libretranslate import ERRORS
from attnmt.server.schemas import FrontendSettings, SuggestRequest, SuggestResponse, text_fields_body_doc
from attnmt.server.service import language_name

router = APIRouter(tags=["LibreTranslate"])

FRONTEND_TIMEOUT_MS = 500  # LibreTranslate's default

_SUGGEST_DOC = text_fields_body_doc({"q": "the source text", "s": "the suggested translation",
                                     "source": "source language code", "target": "target language code",
                                     "api_key": "needed when the server runs with --api-key"},
                                    required=["q", "s", "source", "target"])


@router.get("/frontend/settings", response_model=FrontendSettings)
async def frontend_settings(request: Request, models: ModelSet = Depends(get_models)) -> FrontendSettings:
    """The settings LibreTranslate's page reads: limits, keys, which optional endpoints are on, and
    the pair shown first (source `auto` when the server reads several languages)."""
    settings = models.default.settings
    several = len(models.sources) > 1
    source = ({"code": "auto", "name": "Auto Detect"} if several else
              {"code": models.default.source_lang, "name": language_name(models.default.source_lang)})
    target = {"code": models.default.target_lang, "name": language_name(models.default.target_lang)}
    return FrontendSettings(charLimit=-1, frontendTimeout=FRONTEND_TIMEOUT_MS, apiKeys=settings.api_key is not None,
                            keyRequired=settings.api_key is not None,
                            suggestions=getattr(request.app.state, "suggestions", None) is not None,
                            filesTranslation=True, supportedFilesFormat=[*SUFFIXES, *ALIASES],
                            language={"source": source, "target": target})


@router.post("/suggest", response_model=SuggestResponse, responses=ERRORS, openapi_extra=_SUGGEST_DOC)
async def suggest(request: Request, models: ModelSet = Depends(get_models)) -> SuggestResponse:
    """Append a suggested translation to the --suggestions file (fsynced before answering)."""
    suggestions = getattr(request.app.state, "suggestions", None)
    if suggestions is None:
        raise ApiError(403, "Suggestions are disabled on this server.")
    body = await read_model(request, SuggestRequest)
    models.check_access(request, body.api_key)
    for name in ("q", "s", "source", "target"):
        if not getattr(body, name):
            raise ApiError(400, f"Invalid request: missing {name} parameter")
    models.route(body.source, body.target)  # only pairs the server translates
    await suggestions.append(body.q, body.s, body.source, body.target)
    return SuggestResponse(success=True)
