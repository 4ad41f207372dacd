"""`attnmt serve RUN_OR_EXPORT [RUN_OR_EXPORT ...]`: one model per argument (a training run, a
CTranslate2 export, or runs joined by '+' as one ensemble), one language pair each; the parsed
options -> `ServeSettings` and `ModelSpec`s, then the service under uvicorn until Ctrl-C or SIGTERM.

On either signal uvicorn stops accepting connections, lets the requests in flight finish
(up to GRACE_SECONDS), runs the lifespan shutdown, and the command exits 0.
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass
from pathlib import Path

from attnmt.commands.compare import system_paths
from attnmt.errors import AttnmtError
from attnmt.server.settings import ServeSettings

log = logging.getLogger(__name__)

GRACE_SECONDS = 60  # how long shutdown waits for requests in flight


def settings_from_args(args) -> ServeSettings:
    try:
        return ServeSettings(host=args.host, port=args.port, max_wait_ms=args.max_wait_ms,
                             max_batch_sentences=args.max_batch_sentences, max_texts=args.max_texts,
                             beam_size=args.beam, api_key=args.api_key, cors_origin=args.cors_origin,
                             req_limit=args.req_limit, suggestions=args.suggestions,
                             max_sentences=args.max_sentences, files_dir=args.files_dir,
                             file_limit_kb=args.file_limit_kb, files_expire_minutes=args.files_expire_minutes,
                             max_files=args.max_files)
    except ValueError as err:
        raise AttnmtError(str(err)) from None


@dataclass(frozen=True)
class ModelSpec:
    """One served model: its run directories (several: an ensemble) and the engine that loads them."""

    paths: tuple[str, ...]
    engine: str

    @property
    def name(self) -> str:
        return "+".join(Path(p).name for p in self.paths)


def model_specs(arguments: list[str], engine: str | None) -> list[ModelSpec]:
    """A ModelSpec per RUN_OR_EXPORT argument, checked before anything loads: each folder is what
    its engine reads (`engine`, or per model: ctranslate2 for an export, native for a run)."""
    from attnmt.run_dir import RunDir
    from attnmt.translator import refuse_ensemble_engine

    specs, pairs = [], {}
    for argument in arguments:
        paths = tuple(system_paths(argument))
        chosen = engine or ("ctranslate2" if RunDir(paths[0]).is_export else "native")
        refuse_ensemble_engine(len(paths), chosen)
        for path in paths:
            if chosen == "ctranslate2":
                RunDir(path).require_export()
            else:
                RunDir(path).require_run()
        data = RunDir(paths[0]).config().data
        pair = f"{data.src_lang} -> {data.tgt_lang}"
        if pair in pairs:
            raise AttnmtError(f"{pairs[pair]} and {argument} both translate {pair}: serve one model per pair "
                              f"(join runs with '+' to serve them as one ensemble)")
        pairs[pair] = argument
        specs.append(ModelSpec(paths, chosen))
    return specs


def run(args) -> int:
    """Serve the models over HTTP (LibreTranslate API, /v1 API, the page at /)."""
    import uvicorn

    from attnmt.server.app import create_app
    from attnmt.server.connection import uvicorn_options
    from attnmt.translator import Translator

    settings = settings_from_args(args)
    specs = model_specs(args.models, args.engine)  # refuse what cannot load before the server starts
    if settings.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("listening on %s: reachable from other machines%s", settings.host,
                    "" if settings.api_key else " by anyone (no --api-key)")

    def loader(spec: ModelSpec):
        return lambda: Translator.load(list(spec.paths), checkpoint=args.checkpoint, device=args.device,
                                       engine=spec.engine)

    app = create_app(settings, models=[(spec.name, loader(spec)) for spec in specs])
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="info", access_log=False,
                            timeout_graceful_shutdown=GRACE_SECONDS, lifespan="on",
                            **uvicorn_options())  # header read deadline, keep-alive and head size limits
    server = uvicorn.Server(config)
    # uvicorn re-raises the signal that stopped it once it has shut down gracefully; these
    # no-op handlers receive it, so a clean shutdown exits 0 instead of dying by the signal.
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not server.started:
        raise AttnmtError(f"could not serve on {settings.host}:{settings.port} (see the log above)")
    log.info("attnmt serve: stopped")
    return 0
