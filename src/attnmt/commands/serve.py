"""`attnmt serve RUN_DIR [RUN_DIR ...]` (several: one ensemble): the parsed options -> `ServeSettings`, then the service under uvicorn until Ctrl-C or SIGTERM.

On either signal uvicorn stops accepting connections, lets the requests in flight finish
(up to GRACE_SECONDS), runs the lifespan shutdown, and the command exits 0.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path

from attnmt.errors import AttnmtError
from attnmt.run_dir import RunDir
from attnmt.server.settings import ServeSettings

log = logging.getLogger(__name__)

GRACE_SECONDS = 60  # how long shutdown waits for requests in flight


def settings_from_args(args) -> ServeSettings:
    try:
        return ServeSettings(host=args.host, port=args.port, max_wait_ms=args.max_wait_ms,
                             max_batch_sentences=args.max_batch_sentences, max_texts=args.max_texts,
                             beam_size=args.beam, api_key=args.api_key, cors_origin=args.cors_origin)
    except ValueError as err:
        raise AttnmtError(str(err)) from None


def run(args) -> int:
    """Serve RUN_DIR's model over HTTP (LibreTranslate API, /v1 API, the page at /)."""
    import uvicorn

    from attnmt.server.app import create_app
    from attnmt.server.connection import uvicorn_options
    from attnmt.translator import Translator, refuse_ensemble_engine

    settings = settings_from_args(args)
    refuse_ensemble_engine(len(args.run_dir), args.engine)  # refuse what cannot load before the server starts
    for path in args.run_dir:  # one run, or the members of an ensemble
        if args.engine == "ctranslate2":
            RunDir(path).require_export()
        else:
            RunDir(path).require_run()
    if settings.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("listening on %s: reachable from other machines%s", settings.host,
                    "" if settings.api_key else " by anyone (no --api-key)")
    name = "+".join(Path(p).name for p in args.run_dir) if len(args.run_dir) > 1 else None  # an ensemble's
    app = create_app(settings, lambda: Translator.load(args.run_dir, checkpoint=args.checkpoint, device=args.device,
                                                       engine=args.engine), name=name)
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
