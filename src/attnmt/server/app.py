"""The FastAPI application: routers, error handlers, the request limits, CORS and the lifespan hook.

    app = create_app(ServeSettings(), load=lambda: Translator.load("runs/demo"))
    app = create_app(ServeSettings(), models=[("de-en", load_de_en), ("en-de", load_en_de)])

The lifespan hook loads each model once (off the event loop, one after the other), starts a
micro-batcher per model and opens the store of translated files, and on shutdown (after uvicorn
has let the requests in flight finish) stops them (a temporary store's folder is removed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import asynccontextmanager
from typing import Callable, Sequence

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.staticfiles import StaticFiles

from attnmt import __version__
from attnmt.direction import names as direction_names
from attnmt.server.langid import LanguageDetector, source_lexicons
from attnmt.server.api_errors import install_error_handlers
from attnmt.server.filestore import FileStore
from attnmt.server.limits import RequestLimits
from attnmt.server.routing import ModelSet
from attnmt.server.ratelimit import RateLimiter
from attnmt.server.routes import detect, frontend, health, libretranslate, page, translate_file, v1
from attnmt.server.routes.page import STATIC
from attnmt.server.service import services_for
from attnmt.server.settings import ServeSettings
from attnmt.server.suggestions import SuggestionLog

log = logging.getLogger(__name__)


def create_app(settings: ServeSettings, load: Callable[[], object] | None = None, *, name: str | None = None,
               models: Sequence[tuple[str | None, Callable[[], object]]] | None = None) -> FastAPI:
    """The service for the translator that `load()` returns, or for each (name, load) of `models`
    (one per language pair); each load is called once, at start-up."""
    if (load is None) == (models is None):
        raise ValueError("create_app needs either load or models")
    loads = [(name, load)] if models is None else list(models)
    suggestions = SuggestionLog(settings.suggestions) if settings.suggestions else None  # refused before loading
    store = FileStore(settings.files_dir, expire_s=settings.files_expire_minutes * 60, max_files=settings.max_files)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        services = []
        for model_name, load_one in loads:
            start = time.perf_counter()
            translator = await asyncio.to_thread(load_one)
            for service in services_for(translator, settings, name=model_name):
                service.model_card()  # computed once now, not on the first request
                services.append(service)
            log.info("model %s (%s, %s) loaded in %.1f s", service.name, service.arch,
                     direction_names(translator.directions), time.perf_counter() - start)
        model_set = ModelSet(services)  # refuses two models of one direction
        start = time.perf_counter()
        app.state.detector = await asyncio.to_thread(LanguageDetector, model_set.sources, source_lexicons(services))
        log.info("language identification (%s) loaded in %.1f s", ", ".join(app.state.detector.languages),
                 time.perf_counter() - start)
        batchers = list({id(s.batcher): s.batcher for s in services}.values())  # a multilingual model's: one
        for batcher in batchers:
            await batcher.start()
        app.state.models = model_set
        app.state.suggestions = suggestions
        app.state.limiter = RateLimiter(settings.req_limit) if settings.req_limit else None
        app.state.files = store
        app.state.service = model_set.default
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        log.info("serving %s; open http://%s:%d/ (API reference at /docs)",
                 ", ".join(s.arrow for s in services), host, settings.port)
        try:
            yield
        finally:
            store.close()
            for batcher in batchers:
                await batcher.close()
                log.info("a model stopped after %d batches, %d sentences", batcher.stats.batches,
                         batcher.stats.sentences)

    app = FastAPI(title="attnmt", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="LibreTranslate-compatible translation API, plus attnmt's own /v1 API with "
                              "tokens, scores and attention weights.")
    install_error_handlers(app)
    for router in (libretranslate.router, translate_file.router, detect.router, frontend.router, v1.router, health.router,
                   page.router):
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    if settings.cors_origin:
        app.add_middleware(CORSMiddleware, allow_origins=[settings.cors_origin], allow_methods=["GET", "POST"],
                           allow_headers=["Content-Type", "X-API-Key"])
    app.add_middleware(RequestLimits, max_bytes=settings.max_body_bytes)  # size, read time, JSON depth, Unicode
    return app
