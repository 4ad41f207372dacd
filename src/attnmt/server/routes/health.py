"""GET /health: answers while a batch runs (the model is off the event loop)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from attnmt.server.routing import ModelSet
from attnmt.server.routes.deps import get_models
from attnmt.server.schemas import HealthResponse

router = APIRouter(tags=["health"])


@router.get("/health", response_model=HealthResponse)
async def health(models: ModelSet = Depends(get_models)) -> HealthResponse:
    """The server is up and its models loaded; queue and batch counters, summed over the models."""
    services = models.services
    stats = [s.batcher.stats for s in services]
    return HealthResponse(status="ok", model=", ".join(s.name for s in services),
                          queued=sum(s.batcher.queued for s in services), running=sum(t.running for t in stats),
                          in_flight=sum(s.in_flight for s in services), batches=sum(t.batches for t in stats),
                          sentences=sum(t.sentences for t in stats),
                          largest_batch=max(t.largest_batch for t in stats),
                          failed_batches=sum(t.failed_batches for t in stats))
