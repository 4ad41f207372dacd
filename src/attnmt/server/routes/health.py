"""GET /health: answers while a batch runs (the model is off the event loop)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from attnmt.server.routes.deps import get_service
from attnmt.server.schemas import HealthResponse
from attnmt.server.service import TranslationService

router = APIRouter(tags=["health"])


@router.get("/health", response_model=HealthResponse)
async def health(service: TranslationService = Depends(get_service)) -> HealthResponse:
    """The server is up and the model loaded; queue and batch counters."""
    stats = service.batcher.stats
    return HealthResponse(status="ok", model=service.name, queued=service.batcher.queued, running=stats.running,
                          in_flight=service.in_flight, batches=stats.batches, sentences=stats.sentences,
                          largest_batch=stats.largest_batch, failed_batches=stats.failed_batches)
