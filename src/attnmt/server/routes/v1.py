"""attnmt's own API: POST /v1/translate (tokens, scores, n-best, attention), GET /v1/model (the
default model) and GET /v1/models (every model the server holds)."""

from __future__ import annotations

from typing import Optional

from fastapi import APIRouter, Depends, Header, Request

from attnmt.server.errors import ApiError
from attnmt.server.models import ModelSet
from attnmt.server.routes.deps import get_models, get_service
from attnmt.server.routes.libretranslate import ERRORS
from attnmt.server.schemas import (ErrorResponse, V1Alternative, V1Model, V1TranslateRequest, V1TranslateResponse,
                                   V1Translation)
from attnmt.server.service import TranslationService

router = APIRouter(prefix="/v1", tags=["attnmt"])

ATTENTION_DIGITS = 6  # weights are float32: six decimals keep them to ~1e-6 and the JSON small


def _translation(result, with_attention: bool) -> V1Translation:
    attention = None
    if with_attention:
        attention = [[round(float(w), ATTENTION_DIGITS) for w in row] for row in result.attention.tolist()]
    return V1Translation(text=result.text, tokens=result.tokens, source_tokens=result.source_tokens,
                         score=float(result.score), attention=attention,
                         alternatives=[V1Alternative(text=a.text, tokens=a.tokens, score=float(a.score))
                                       for a in result.alternatives],
                         warnings=result.warnings)


@router.post("/translate", response_model=V1TranslateResponse,
             responses={**ERRORS, 422: {"model": ErrorResponse, "description": "A field out of range or of a wrong type"}})
async def translate(body: V1TranslateRequest, request: Request, x_api_key: Optional[str] = Header(None),
                    models: ModelSet = Depends(get_models)) -> V1TranslateResponse:
    """Translate texts; per text the tokens, the score, the n-best list and the attention matrix
    (output tokens x source tokens). `layer`/`head` pick a Transformer's cross-attention;
    `source` and `target` pick the model (default: the first)."""
    models.check_access(request, body.api_key if body.api_key is not None else x_api_key)
    if (body.source is None) != (body.target is None):
        raise ApiError(422, "Invalid request: give both source and target, or neither")
    service = models.default if body.source is None else models.route(body.source, body.target)
    service.check_texts(body.texts)
    settings = service.settings_for(beam_size=body.beam_size, n_best=body.n_best,
                                    length_penalty=body.length_penalty, layer=body.layer, head=body.head)
    results = await service.translate(body.texts, settings)
    return V1TranslateResponse(translations=[_translation(r, body.attention) for r in results],
                               beam_size=settings.beam_size, layer=body.layer, head=body.head)


@router.get("/model", response_model=V1Model)
async def model(service: TranslationService = Depends(get_service)) -> V1Model:
    """The model: architecture, languages, size, vocabularies, and the run's scores."""
    return V1Model(**service.model_card())


@router.get("/models", response_model=list[V1Model])
async def all_models(models: ModelSet = Depends(get_models)) -> list[V1Model]:
    """Every model the server holds, in the order given to `attnmt serve` (the first is the default)."""
    return [V1Model(**service.model_card()) for service in models.services]
