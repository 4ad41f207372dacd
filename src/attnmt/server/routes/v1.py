"""attnmt's own API: POST /v1/translate (tokens, scores, n-best, attention, alignments, prefixes),
POST /v1/score (forced decoding of given translations), GET /v1/model (the default model) and
GET /v1/models (every model the server holds).

Attention is asked for (`attention: true`) and bounded: a text of several sentences
carries its attention as per-sentence blocks (`attention_blocks`: each sentence's output tokens
attend only to its own source tokens), linear in its sentences; the dense matrix (`attention`)
comes as well while it holds at most DENSE_CELLS weights. A one-sentence text has its matrix only
(its one block). One
answer carries at most ATTENTION_CELLS weights: past them a hypothesis' attention is left out,
and its text's `warnings` say so (issue 66 group A: a 600-sentence paragraph's matrix was 92 MB).
"""

from __future__ import annotations

import math
from typing import Optional

from fastapi import APIRouter, Depends, Header, Request

from attnmt.decoding.results import BlockAttention
from attnmt.server.api_errors import ApiError
from attnmt.server.routing import ModelSet
from attnmt.server.routes.deps import get_models, get_service
from attnmt.server.routes.libretranslate import ERRORS
from attnmt.server.schemas import (ErrorResponse, V1Alternative, V1AttentionBlock, V1Model, V1Score, V1ScoreRequest,
                                   V1ScoreResponse, V1Sentence, V1TranslateRequest, V1TranslateResponse, V1Translation)
from attnmt.server.service import TranslationService

router = APIRouter(prefix="/v1", tags=["attnmt"])

ATTENTION_DIGITS = 6  # weights are float32: six decimals keep them to ~1e-6 and the JSON small
DENSE_CELLS = 40_000  # a paragraph's dense matrix up to this many weights (200 x 200); its blocks always
ATTENTION_CELLS = 1_000_000  # attention weights in one answer (about 9 MB of JSON), dense and blocks together
RESPONSES = {**ERRORS, 422: {"model": ErrorResponse, "description": "A field out of range or of a wrong type"}}


def _matrix(weights) -> Optional[list[list[float]]]:
    if weights is None:
        return None
    return [[round(float(w), ATTENTION_DIGITS) for w in row] for row in weights.tolist()]


class AttentionBudget:
    """The attention weights one answer may still carry (ATTENTION_CELLS in all)."""

    def __init__(self, cells: int = ATTENTION_CELLS):
        self.left = cells

    def take(self, cells: int) -> bool:
        if cells > self.left:
            self.left = 0  # what follows is left out too: the answer stays in order
            return False
        self.left -= cells
        return True

    def attention(self, hyp, warnings: list[str]) -> tuple[Optional[list], Optional[list]]:
        """A hypothesis' (dense matrix, blocks) as the answer carries them; a part left out is said
        in `warnings` (once per kind)."""
        weights = hyp.attention
        if weights is None:
            return None, None
        if not isinstance(weights, BlockAttention):
            rows, cols = weights.shape
            if self.take(rows * cols):
                return _matrix(weights), None  # one sentence: the matrix is its one block
            _say(warnings, f"attention left out: the answer would carry more than {ATTENTION_CELLS:,} attention "
                           f"weights (ask for fewer texts or alternatives, or attention: false)")
            return None, None
        if not self.take(weights.cells):
            _say(warnings, f"attention left out: the answer would carry more than {ATTENTION_CELLS:,} attention "
                           f"weights (ask for fewer texts or alternatives, or attention: false)")
            return None, None
        blocks = [V1AttentionBlock(row=r, col=c, weights=_matrix(block)) for r, c, block in weights.blocks
                  if block is not None]
        rows, cols = weights.shape
        if rows * cols <= DENSE_CELLS and self.take(rows * cols):
            return _matrix(weights.toarray()), blocks
        _say(warnings, f"attention: the {rows} x {cols} matrix of this text's {len(weights.blocks)} sentences is "
                       f"given as attention_blocks only (one block per sentence; the dense matrix is given up to "
                       f"{DENSE_CELLS:,} weights)")
        return None, blocks


def _say(warnings: list[str], text: str) -> None:
    if text not in warnings:
        warnings.append(text)


def _links(alignment) -> Optional[list[list[int]]]:
    return None if alignment is None else [[int(s), int(t)] for s, t in alignment]


def _token_probs(hyp) -> dict:
    """A hypothesis' per-token log-probabilities and probabilities (None when the engine gives none)."""
    if hyp.token_log_probs is None:
        return {"token_log_probs": None, "token_probs": None}
    logps = [float(p) for p in hyp.token_log_probs]
    return {"token_log_probs": logps, "token_probs": [math.exp(p) for p in logps]}


def _translation(result, with_attention: bool, budget: AttentionBudget) -> V1Translation:
    warnings = list(result.warnings)

    def attention(hyp) -> dict:
        if not with_attention:
            return {"attention": None, "attention_blocks": None}
        dense, blocks = budget.attention(hyp, warnings)
        return {"attention": dense, "attention_blocks": blocks}

    best = attention(result)
    alternatives = [V1Alternative(text=a.text, tokens=a.tokens, score=float(a.score), **attention(a),
                                  replaced=list(a.replaced), alignment=_links(a.alignment), confidence=a.confidence,
                                  **_token_probs(a))
                    for a in result.alternatives]
    return V1Translation(text=result.text, tokens=result.tokens, source_tokens=result.source_tokens,
                         score=float(result.score), **best, alternatives=alternatives,
                         warnings=warnings, replaced=list(result.replaced), alignment=_links(result.alignment),
                         coverage=result.coverage, flagged=result.flagged, uncovered=list(result.uncovered),
                         sentences=[V1Sentence(source=list(s.source), target=list(s.target), coverage=s.coverage,
                                               length_ratio=s.length_ratio, uncovered=list(s.uncovered),
                                               flagged=s.flagged) for s in result.sentences],
                         confidence=result.confidence, confidence_calibrated=result.confidence_calibrated,
                         withheld=result.withheld, read_as=result.read_as, from_phrases=result.from_phrases,
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
    the n-best list (each with its attention) and the attention (asked with `attention: true`: the
    matrix of output tokens x source tokens, and a paragraph's per-sentence blocks, within
    ATTENTION_CELLS weights an answer). `layer`/`head` pick a Transformer's cross-attention;
    `alignments` adds word links; `target_prefix` (one text or null per text) fixes the start of a translation; `glossary` pairs are terminology constraints on every text;
    `source` and `target` pick the model (default: the first). `coverage`, `flagged`, `uncovered`
    and `sentences` say how much of each text the translation covered (attention, length)."""
    models.check_access(request, body.api_key if body.api_key is not None else x_api_key)
    service = _route(models, body.source, body.target)
    service.check_texts(body.texts)
    if body.target_prefix is not None and len(body.target_prefix) != len(body.texts):
        raise ApiError(422, f"Invalid request: target_prefix has {len(body.target_prefix)} entries for "
                            f"{len(body.texts)} texts (give one text or null per text)")
    options = service.options_for(beam_size=body.beam_size, n_best=body.n_best, length_penalty=body.length_penalty,
                                  layer=body.layer, head=body.head, alignments=body.alignments,
                                  min_confidence=body.min_confidence, below_confidence=body.below_confidence)
    constraints = None if not body.glossary else [[tuple(pair) for pair in body.glossary]] * len(body.texts)
    results = await service.translate(body.texts, options, target_prefix=body.target_prefix, constraints=constraints,
                                      max_sentences=service.settings.max_sentences)
    budget = AttentionBudget()
    return V1TranslateResponse(translations=[_translation(r, body.attention, budget) for r in results],
                               beam_size=options.beam_size, layer=body.layer, head=body.head)


def _score(result, with_attention: bool, budget: AttentionBudget) -> V1Score:
    scored = not math.isnan(result.log_prob)
    logps = [float(p) for p in result.token_log_probs]
    warnings = list(result.warnings)
    attention = budget.attention(result, warnings)[0] if with_attention and scored else None
    return V1Score(source_tokens=result.source_tokens, tokens=result.target_tokens,
                   log_prob=float(result.log_prob) if scored else None,
                   normalized=float(result.normalized) if scored else None, num_tokens=result.num_tokens,
                   token_log_probs=logps, token_probs=[math.exp(p) for p in logps],
                   attention=attention, warnings=warnings)


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
    budget = AttentionBudget()
    return V1ScoreResponse(scores=[_score(r, body.attention, budget) for r in results])


@router.get("/model", response_model=V1Model)
async def model(service: TranslationService = Depends(get_service)) -> V1Model:
    """The model: architecture, languages, size, vocabularies, and the run's scores."""
    return V1Model(**service.model_card())


@router.get("/models", response_model=list[V1Model])
async def all_models(models: ModelSet = Depends(get_models)) -> list[V1Model]:
    """Every model the server holds, in the order given to `attnmt serve` (the first is the default)."""
    return [V1Model(**service.model_card()) for service in models.services]
