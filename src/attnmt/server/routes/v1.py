"""attnmt's own API: POST /v1/translate (tokens, scores, n-best, attention, alignments, prefixes),
POST /v1/score (forced decoding of given translations), GET /v1/model (the default model) and
GET /v1/models (every model the server holds)."""

from __future__ import annotations

import math
from typing import Optional

from fastapi import APIRouter, Depends, Header, Request

from attnmt.server.api_errors import ApiError
from attnmt.server.routing import ModelSet
from attnmt.server.routes.deps import get_models, get_service
from attnmt.server.routes.libretranslate import ERRORS
from attnmt.server.schemas import (ErrorResponse, V1Alternative, V1Model, V1Score, V1ScoreRequest, V1ScoreResponse,
                                   V1Sentence, V1TranslateRequest, V1TranslateResponse, V1Translation)
from attnmt.server.service import TranslationService

router = APIRouter(prefix="/v1", tags=["attnmt"])

ATTENTION_DIGITS = 6  # weights are float32: six decimals keep them to ~1e-6 and the JSON small
RESPONSES = {**ERRORS, 422: {"model": ErrorResponse, "description": "A field out of range or of a wrong type"}}


def _matrix(weights) -> Optional[list[list[float]]]:
    if weights is None:
        return None
    return [[round(float(w), ATTENTION_DIGITS) for w in row] for row in weights.tolist()]


def _links(alignment) -> Optional[list[list[int]]]:
    return None if alignment is None else [[int(s), int(t)] for s, t in alignment]


def _token_probs(hyp) -> dict:
    """A hypothesis' per-token log-probabilities and probabilities (None when the engine gives none)."""
    if hyp.token_log_probs is None:
        return {"token_log_probs": None, "token_probs": None}
    logps = [float(p) for p in hyp.token_log_probs]
    return {"token_log_probs": logps, "token_probs": [math.exp(p) for p in logps]}


def _translation(result, with_attention: bool) -> V1Translation:
    def attention(hyp):
        return _matrix(hyp.attention) if with_attention else None

    return V1Translation(text=result.text, tokens=result.tokens, source_tokens=result.source_tokens,
                         score=float(result.score), attention=attention(result),
                         alternatives=[V1Alternative(text=a.text, tokens=a.tokens, score=float(a.score),
                                                     attention=attention(a), replaced=list(a.replaced),
                                                     alignment=_links(a.alignment), **_token_probs(a))
                                       for a in result.alternatives],
                         warnings=result.warnings, replaced=list(result.replaced), alignment=_links(result.alignment),
                         coverage=result.coverage, flagged=result.flagged, uncovered=list(result.uncovered),
                         sentences=[V1Sentence(source=list(s.source), target=list(s.target), coverage=s.coverage,
                                               length_ratio=s.length_ratio, uncovered=list(s.uncovered),
                                               flagged=s.flagged) for s in result.sentences],
                         **_token_probs(result))


def _route(models: ModelSet, source: Optional[str], target: Optional[str]) -> TranslationService:
    if (source is None) != (target is None):
        raise ApiError(422, "Invalid request: give both source and target, or neither")
    return models.default if source is None else models.route(source, target)


@router.post("/translate", response_model=V1TranslateResponse, responses=RESPONSES)
async def translate(body: V1TranslateRequest, request: Request, x_api_key: Optional[str] = Header(None),
                    models: ModelSet = Depends(get_models)) -> V1TranslateResponse:
    """Translate texts, each sentence by sentence (split in the source language, joined back with
    the text's own spacing); per text the tokens, the score, each token's probability (native engine),
    the n-best list (each with its attention) and the attention matrix (output tokens x source
    tokens). `layer`/`head` pick a Transformer's cross-attention; `alignments` adds word links; `target_prefix` (one text or null per text)
    fixes the start of a translation; `glossary` pairs are terminology constraints on every text;
    `source` and `target` pick the model (default: the first). `coverage`, `flagged`, `uncovered`
    and `sentences` say how much of each text the translation covered (attention, length)."""
    models.check_access(request, body.api_key if body.api_key is not None else x_api_key)
    service = _route(models, body.source, body.target)
    service.check_texts(body.texts)
    if body.target_prefix is not None and len(body.target_prefix) != len(body.texts):
        raise ApiError(422, f"Invalid request: target_prefix has {len(body.target_prefix)} entries for "
                            f"{len(body.texts)} texts (give one text or null per text)")
    options = service.options_for(beam_size=body.beam_size, n_best=body.n_best, length_penalty=body.length_penalty,
                                  layer=body.layer, head=body.head, alignments=body.alignments)
    constraints = None if not body.glossary else [[tuple(pair) for pair in body.glossary]] * len(body.texts)
    results = await service.translate(body.texts, options, target_prefix=body.target_prefix, constraints=constraints)
    return V1TranslateResponse(translations=[_translation(r, body.attention) for r in results],
                               beam_size=options.beam_size, layer=body.layer, head=body.head)


def _score(result, with_attention: bool) -> V1Score:
    scored = not math.isnan(result.log_prob)
    logps = [float(p) for p in result.token_log_probs]
    return V1Score(source_tokens=result.source_tokens, tokens=result.target_tokens,
                   log_prob=float(result.log_prob) if scored else None,
                   normalized=float(result.normalized) if scored else None, num_tokens=result.num_tokens,
                   token_log_probs=logps, token_probs=[math.exp(p) for p in logps],
                   attention=_matrix(result.attention) if with_attention and scored else None,
                   warnings=result.warnings)


@router.post("/score", response_model=V1ScoreResponse, responses=RESPONSES)
async def score(body: V1ScoreRequest, request: Request, x_api_key: Optional[str] = Header(None),
                models: ModelSet = Depends(get_models)) -> V1ScoreResponse:
    """Forced decoding: per (text, translation) pair the model's log-probability of the
    translation (<eos> included), each token's probability and the attention (native engine;
    null with CTranslate2). Compare with /v1/translate's best: a translation the model scores
    higher than its own output is one the beam search missed."""
    models.check_access(request, body.api_key if body.api_key is not None else x_api_key)
    service = _route(models, body.source, body.target)
    service.check_texts(body.texts)
    if len(body.translations) != len(body.texts):
        raise ApiError(422, f"Invalid request: {len(body.translations)} translations for {len(body.texts)} texts "
                            f"(give one per text)")
    results = await service.score(body.texts, body.translations)
    return V1ScoreResponse(scores=[_score(r, body.attention) for r in results])


@router.get("/model", response_model=V1Model)
async def model(service: TranslationService = Depends(get_service)) -> V1Model:
    """The model: architecture, languages, size, vocabularies, and the run's scores."""
    return V1Model(**service.model_card())


@router.get("/models", response_model=list[V1Model])
async def all_models(models: ModelSet = Depends(get_models)) -> list[V1Model]:
    """Every model the server holds, in the order given to `attnmt serve` (the first is the default)."""
    return [V1Model(**service.model_card()) for service in models.services]
