"""`attnmt serve RUN_OR_EXPORT [RUN_OR_EXPORT ...]`: one model per argument (a training run, a
CTranslate2 export, or runs joined by '+' as one ensemble), one language pair each; the parsed
options -> `ServeSettings` and `ModelSpec`s, then the service under uvicorn until Ctrl-C or SIGTERM.

On either signal uvicorn stops accepting connections, lets the requests in flight finish
(up to GRACE_SECONDS), runs the lifespan shutdown, and the command exits 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
from dataclasses import dataclass
from pathlib import Path

from attnmt.bounds import CONFIDENCE, EXPIRE_MINUTES, FILE_KB, FILES, SENTENCES, WAIT_MS
from attnmt.commands.arguments import beam_size, bounded, ensemble_paths, non_negative_int, positive_int
from attnmt.direction import Direction
from attnmt.errors import AttnmtError
from attnmt.server.settings import ServeSettings

HELP = "serve runs over HTTP: LibreTranslate API, /v1 API, attention page"

log = logging.getLogger(__name__)

GRACE_SECONDS = 60  # how long shutdown waits for requests in flight


def settings_from_args(args) -> ServeSettings:
    try:
        return ServeSettings(host=args.host, port=args.port, max_wait_ms=args.max_wait_ms,
                             max_batch_sentences=args.max_batch_sentences, max_texts=args.max_texts,
                             beam_size=args.beam, min_confidence=args.min_confidence,
                             api_key=args.api_key, cors_origin=args.cors_origin,
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
        paths = tuple(ensemble_paths(argument))
        chosen = engine or RunDir(paths[0]).engine
        refuse_ensemble_engine(len(paths), chosen)
        for path in paths:
            if chosen == "ctranslate2":
                RunDir(path).require_export()
            else:
                RunDir(path).require_run()
        data = RunDir(paths[0]).config().data
        pair = Direction(data.src_lang, data.tgt_lang).arrow
        if pair in pairs:
            raise AttnmtError(f"{pairs[pair]} and {argument} both translate {pair}: serve one model per pair "
                              f"(join runs with '+' to serve them as one ensemble)")
        pairs[pair] = argument
        specs.append(ModelSpec(paths, chosen))
    return specs


def refuse_writing_into_models(settings: ServeSettings, specs: list[ModelSpec]) -> None:
    """What the service writes (--files-dir, --suggestions) never equals, holds or lies inside a
    model folder it reads (files.refuse_overwrite), before the server starts."""
    from attnmt.files import refuse_overwrite

    models = [("model folder", path) for spec in specs for path in spec.paths]
    for flag, output in (("--files-dir", settings.files_dir), ("--suggestions", settings.suggestions)):
        if output is not None:
            try:
                refuse_overwrite(output, {}, models)
            except AttnmtError as err:
                raise AttnmtError(f"{flag} {err}") from None


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("models", nargs="+", metavar="RUN_OR_EXPORT",
                        help="a run or a CTranslate2 export per language pair (one model each; runs joined by '+', "
                             "e.g. runs/a-seed1+runs/a-seed2, are one ensemble)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0: every interface)")
    parser.add_argument("--port", type=non_negative_int, default=8000)
    parser.add_argument("--max-wait-ms", type=bounded(WAIT_MS), default=5.0,
                        help="how long a sentence waits for others to share its batch")
    parser.add_argument("--max-batch-sentences", type=positive_int, default=32, help="most sentences per model call (1: no batching)")
    parser.add_argument("--max-texts", type=positive_int, default=64, help="most texts per request (more: 413)")
    parser.add_argument("--beam", type=beam_size, default=None, help="default beam size (default: the run's)")
    parser.add_argument("--min-confidence", type=bounded(CONFIDENCE), default=None, metavar="P",
                        help="answer the source, with a warning, instead of a translation less confident than P "
                             "(0..1; a request's min_confidence overrides it; default: every translation)")
    parser.add_argument("--api-key", default=None, help="require this key (api_key field or X-API-Key header)")
    parser.add_argument("--cors-origin", default=None, help="allow cross-origin requests from this origin")
    parser.add_argument("--req-limit", type=positive_int, default=None, metavar="N",
                        help="at most N requests a minute per client and per API key (more: 429)")
    parser.add_argument("--suggestions", default=None, metavar="FILE",
                        help="turn POST /suggest on: append each suggestion to FILE as one JSON line")
    parser.add_argument("--max-sentences", type=bounded(SENTENCES), default=1000,
                        help="most sentences in one request's HTML or in one file (more: 413)")
    parser.add_argument("--files-dir", default=None, metavar="DIR",
                        help="where /translate_file keeps translated files (default: a temporary folder, removed at exit)")
    parser.add_argument("--file-limit-kb", type=bounded(FILE_KB), default=512,
                        help="largest file /translate_file takes, in kB (more: 413)")
    parser.add_argument("--files-expire-minutes", type=bounded(EXPIRE_MINUTES), default=60.0,
                        help="how long a translated file can be downloaded")
    parser.add_argument("--max-files", type=bounded(FILES), default=1000,
                        help="most translated files kept at once (more, none expired: 429)")
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    parser.add_argument("--engine", choices=["native", "ctranslate2"], default=None,
                        help="for every model (default: per model, ctranslate2 for an `attnmt export` folder, "
                             "native for a training run)")


def run(args) -> int:
    """Serve the models over HTTP (LibreTranslate API, /v1 API, the page at /)."""
    import uvicorn

    from attnmt.server.app import create_app
    from attnmt.server.connection import uvicorn_options
    from attnmt.translator import Translator

    settings = settings_from_args(args)
    specs = model_specs(args.models, args.engine)  # refuse what cannot load before the server starts
    refuse_writing_into_models(settings, specs)
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
