"""The loaded model as the routes see it: checks a request against the model, sends its texts
through the micro-batcher, and describes the model (languages, sizes, scores).

A multilingual model gets one TranslationService per direction (`services_for`), sharing its
micro-batcher and worker thread: a batch holds sentences of one direction (their DecodingOptions
carry it), and the model is only ever used by that one thread.

The routes stay thin: they parse, call `TranslationService.translate`, and shape the answer.
"""

from __future__ import annotations

import hmac
import logging
from pathlib import Path
from typing import Sequence

from attnmt.run_dir import RunDir, no_scores
from attnmt.server.batcher import MicroBatcher
from attnmt.server.api_errors import ApiError
from attnmt.bounds import BEAM
from attnmt.decoding.options import DecodingOptions
from attnmt.direction import Direction
from attnmt.server.settings import ServeSettings

log = logging.getLogger(__name__)

LANGUAGE_NAMES = {"de": "German", "en": "English", "fr": "French", "cs": "Czech", "es": "Spanish",
                  "it": "Italian", "nl": "Dutch", "pt": "Portuguese", "ru": "Russian", "zh": "Chinese",
                  "ja": "Japanese", "ar": "Arabic", "pl": "Polish", "tr": "Turkish", "uk": "Ukrainian"}


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


class TranslationService:
    """A Translator behind a MicroBatcher, with the checks every route shares."""

    def __init__(self, translator, settings: ServeSettings, *, name: str | None = None,
                 direction: Direction | None = None, batcher: MicroBatcher | None = None):
        """`direction`: the one a multilingual model's service serves (with its shared `batcher`)."""
        self.translator = translator
        self.settings = settings
        cfg = translator.cfg
        self.multilingual = direction is not None
        self.direction = direction or Direction(cfg.data.src_lang, cfg.data.tgt_lang)
        self.source_lang, self.target_lang = self.direction
        self.arch = cfg.model.arch
        self.beam_size = settings.beam_size or cfg.search.beam_size
        run_dir = getattr(translator, "run_dir", None)
        self.name = name or (Path(run_dir).name if run_dir else "model")
        self.batcher = batcher or MicroBatcher(translator.translate, max_wait_ms=settings.max_wait_ms,
                                               max_batch_sentences=settings.max_batch_sentences)
        self.in_flight = 0
        self._card: dict | None = None

    @property
    def languages(self) -> dict:
        """The direction a multilingual model's calls name ({} for a one-direction model)."""
        return dict(source_lang=self.source_lang, target_lang=self.target_lang) if self.multilingual else {}

    @property
    def arrow(self) -> str:
        """The direction as the service's messages show it: 'de -> en'."""
        return self.direction.arrow

    # ---- checks ---------------------------------------------------------------------------

    def check_api_key(self, given: str | None) -> None:
        """403 unless the server has no key or `given` is it (LibreTranslate's message)."""
        expected = self.settings.api_key
        if expected is not None and not (isinstance(given, str) and
                                         hmac.compare_digest(given.encode(), expected.encode())):
            raise ApiError(403, "Invalid API key")

    def check_texts(self, texts: Sequence[str]) -> None:
        if len(texts) > self.settings.max_texts:
            raise ApiError(413, f"Invalid request: request ({len(texts)} texts) exceeds text limit "
                                f"({self.settings.max_texts})")

    def options_for(self, **requested) -> DecodingOptions:
        """The decoding options of one request (`requested`: DecodingOptions fields from its body):
        what it leaves unset is the server's (`serve --beam`) or else the model's (the one default
        rule, Translator.decoding_options); every text split into sentences, in this service's
        direction. 422 naming the field when they do not fit (a range, n_best over the beam, a
        layer or head the model lacks)."""
        if requested.get("beam_size") is None:
            requested["beam_size"] = self.settings.beam_size
        try:
            options = self.translator.decoding_options(split_sentences=True, **self.languages, **requested)
        except ValueError as err:
            raise ApiError(422, f"Invalid request: {err}") from None
        if options.layer is not None or options.head is not None:
            if self.arch != "transformer":
                raise ApiError(422, f"Invalid request: layer/head selection needs a Transformer; "
                                    f"this model is an {self.arch}")
            layers, heads = self.translator.cfg.model.dec_layers, self.translator.cfg.model.heads
            if options.layer is not None and not 0 <= options.layer < layers:
                raise ApiError(422, f"Invalid request: layer={options.layer} must be in 0..{layers - 1}")
            if options.head is not None and not 0 <= options.head < heads:
                raise ApiError(422, f"Invalid request: head={options.head} must be in 0..{heads - 1}")
        return options

    # ---- work -----------------------------------------------------------------------------

    async def translate(self, texts: Sequence[str], options: DecodingOptions, *,
                        target_prefix: Sequence[str | None] | None = None, constraints: Sequence | None = None) -> list:
        """TranslationResults for texts decoded as `options` (`options_for`'s: each text split into
        sentences and joined back); a fault inside the model becomes a 500 ApiError, a refused
        combination of arguments (e.g. a glossary with the CTranslate2 engine) a 422.

        Plain requests share micro-batches; a request with alignments, target prefixes or
        constraints runs as its own batch in the model's worker thread (the batcher batches only
        equal options, and carries no per-sentence data)."""
        texts = list(texts)
        plain = (not options.alignments and not constraints
                 and (target_prefix is None or all(p is None for p in target_prefix)))
        if plain:
            return await self._guarded(self.batcher.translate(texts, options))
        prefixes = None if target_prefix is None else list(target_prefix)
        if constraints and self.translator.engine.name != "native":  # refused before the model is busy
            raise ApiError(422, f"Invalid request: glossary: the {self.translator.engine.name} engine has no "
                                f"constrained search; serve the run directory (native engine) to use one")

        def run():
            return self.translator.translate(texts, options, target_prefix=prefixes, constraints=constraints)
        return await self._guarded(self.batcher.run_in_worker(run))

    async def score(self, sources: Sequence[str], translations: Sequence[str]) -> list:
        """ScoreResults (forced decoding) for (source, translation) pairs, in the model's worker thread."""
        sources, translations = list(sources), list(translations)
        return await self._guarded(self.batcher.run_in_worker(
            lambda: self.translator.score(sources, translations, **self.languages)))

    async def _guarded(self, work) -> list:
        """Await model work, counted in flight; a fault inside the model becomes a 500 ApiError."""
        self.in_flight += 1
        try:
            return await work
        except ApiError:
            raise
        except Exception as err:  # a model fault: 500 for this request, the server goes on
            log.error("translation failed: %s: %s", type(err).__name__, err)
            raise ApiError(500, f"Cannot translate text: {type(err).__name__}: {err}") from None
        finally:
            self.in_flight -= 1

    # ---- description ----------------------------------------------------------------------

    def model_card(self) -> dict:
        """What GET /v1/model says: architecture, languages, sizes, scores found in the run."""
        if self._card is not None:
            return self._card
        t = self.translator
        cfg = t.cfg
        model = getattr(t, "model", None)
        parameters = sum(p.numel() for p in model.parameters()) if model is not None else 0
        card = dict(name=self.name, arch=self.arch, source_lang=self.source_lang, target_lang=self.target_lang,
                    directions=[str(d) for d in t.directions],
                    tokenizer=cfg.data.tokenizer, parameters=int(parameters),
                    src_vocab_size=len(t.pipeline.src_vocab), tgt_vocab_size=len(t.pipeline.tgt_vocab),
                    layers=cfg.model.dec_layers if self.arch == "transformer" else None,
                    heads=cfg.model.heads if self.arch == "transformer" else None,
                    beam_size=self.beam_size, max_beam=BEAM.high, max_texts=self.settings.max_texts,
                    max_input_tokens=cfg.search.max_input_tokens,
                    api_key_required=self.settings.api_key is not None)
        run_dir = getattr(t, "run_dir", None)
        card.update(RunDir(run_dir).scores() if run_dir is not None else no_scores())
        self._card = card
        return card


def services_for(translator, settings: ServeSettings, *, name: str | None = None) -> list[TranslationService]:
    """The services of one loaded model: one, or one per direction of a multilingual model (they
    share its micro-batcher, so the model is used by one thread)."""
    if getattr(translator.pipeline, "languages", None) is None:
        return [TranslationService(translator, settings, name=name)]
    batcher = MicroBatcher(translator.translate, max_wait_ms=settings.max_wait_ms,
                           max_batch_sentences=settings.max_batch_sentences)
    return [TranslationService(translator, settings, name=name, direction=direction, batcher=batcher)
            for direction in translator.directions]
