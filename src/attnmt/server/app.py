"""The FastAPI application: routers, error handlers, the request limits, CORS and the lifespan hook.

    app = create_app(ServeSettings(), load=lambda: Translator.load("runs/demo"))

The lifespan hook loads the model once (off the event loop), starts the micro-batcher, and on
shutdown (after uvicorn has let the requests in flight finish) stops it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import asynccontextmanager
from typing import Callable

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.staticfiles import StaticFiles

from attnmt import __version__
from attnmt.server.errors import install_error_handlers
from attnmt.server.limits import RequestLimits
from attnmt.server.routes import health, libretranslate, page, v1
from attnmt.server.routes.page import STATIC
from attnmt.server.service import TranslationService
from attnmt.server.settings import ServeSettings

log = logging.getLogger(__name__)


def create_app(settings: ServeSettings, load: Callable[[], object], *, name: str | None = None) -> FastAPI:
    """The service for the translator that `load()` returns (called once, at start-up)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        start = time.perf_counter()
        translator = await asyncio.to_thread(load)
        service = TranslationService(translator, settings, name=name)
        service.model_card()  # computed once now, not on the first request
        await service.batcher.start()
        app.state.service = service
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        log.info("model %s (%s, %s) loaded in %.1f s; open http://%s:%d/ (API reference at /docs)",
                 service.name, service.arch, service.pair, time.perf_counter() - start, host, settings.port)
        try:
            yield
        finally:
            await service.batcher.close()
            log.info("stopped after %d batches, %d sentences", service.batcher.stats.batches,
                     service.batcher.stats.sentences)

    app = FastAPI(title="attnmt", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="LibreTranslate-compatible translation API, plus attnmt's own /v1 API with "
                              "tokens, scores and attention weights.")
    install_error_handlers(app)
    for router in (libretranslate.router, v1.router, health.router, page.router):
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    if settings.cors_origin:
        app.add_middleware(CORSMiddleware, allow_origins=[settings.cors_origin], allow_methods=["GET", "POST"],
                           allow_headers=["Content-Type", "X-API-Key"])
    app.add_middleware(RequestLimits, max_bytes=settings.max_body_bytes)  # size, read time, JSON depth, Unicode
    return app
