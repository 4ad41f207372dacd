"""The loaded model as the routes see it: checks a request against the model, sends its texts
through the micro-batcher, and describes the model (languages, sizes, scores).

What a request costs is counted once, before any work: `translate` splits every text into its
sentences (data.sentences, in the source language), refuses more than --max-sentences of them
with 413, and hands the sentences (not the texts) to the micro-batcher, which runs them in
batches of --max-batch-sentences taken in turn from every waiting request; each sentence is cut
at search.max_input_tokens by the engine (said in its warnings), so sentences x tokens bound
the work. The texts are joined back from their sentences (decoding/paragraphs.py), their
attention kept per sentence.

A multilingual model gets one TranslationService per direction (`services_for`), sharing its
micro-batcher and worker thread: a batch holds sentences of one direction (their DecodingOptions
carry it), and the model is only ever used by that one thread.

The routes stay thin: they parse, call `TranslationService.translate`, and shape the answer.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from pathlib import Path
from typing import Sequence

from attnmt.run_dir import RunDir, no_scores
from attnmt.server.batcher import MicroBatcher
from attnmt.server.api_errors import ApiError
from attnmt.bounds import BEAM
from attnmt.decoding.options import DecodingOptions
from attnmt.decoding.paragraphs import join_paragraphs, paragraph_units
from attnmt.direction import Direction
from attnmt.server.settings import ServeSettings

log = logging.getLogger(__name__)

LANGUAGE_NAMES = {"de": "German", "en": "English", "fr": "French", "cs": "Czech", "es": "Spanish",
                  "it": "Italian", "nl": "Dutch", "pt": "Portuguese", "ru": "Russian", "zh": "Chinese",
                  "ja": "Japanese", "ar": "Arabic", "pl": "Polish", "tr": "Turkish", "uk": "Ukrainian"}


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


def check_sentences(count: int, limit: int, *, exact: bool = True) -> None:
    """413 when a request holds more than `limit` sentences (`exact` False: at least `count`,
    counting stopped there)."""
    if count > limit:
        raise ApiError(413, f"Invalid request: {'' if exact else 'at least '}{count} sentences exceed the limit "
                            f"of {limit} (--max-sentences)")


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
        if requested.get("min_confidence") is None:
            requested["min_confidence"] = self.settings.min_confidence
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

    def split(self, texts: Sequence[str], *, limit: int | None = None, counted: int = 0
              ) -> list[list[tuple[int, int]]]:
        """Each text's sentences (character spans, data.sentences in this service's source
        language); 413 when they pass `limit` together with `counted` (sentences of the same
        request counted before), said as soon as the count passes it (no later text is split)."""
        spans, count = [], counted
        for i, text in enumerate(texts):
            found = self.translator.sentences(text, self.source_lang)
            spans.append(found)
            count += len(found)
            if limit is not None:
                check_sentences(count, limit, exact=i == len(texts) - 1)
        return spans

    async def sentences(self, texts: Sequence[str], *, limit: int | None = None, counted: int = 0
                        ) -> list[list[tuple[int, int]]]:
        """`split`, off the event loop (a body of 1 MB splits in about 0.3 s)."""
        return await self._guarded(asyncio.to_thread(self.split, list(texts), limit=limit, counted=counted))

    async def translate(self, texts: Sequence[str], options: DecodingOptions, *,
                        target_prefix: Sequence[str | None] | None = None, constraints: Sequence | None = None,
                        spans: Sequence | None = None, max_sentences: int | None = None) -> list:
        """TranslationResults for texts decoded as `options` (`options_for`'s: each text split into
        sentences and joined back); `spans`: the texts' sentences when the route counted them
        already (`sentences`), else they are found here, and more than `max_sentences` get 413
        before any is translated. A fault inside the model becomes a 500 ApiError, a refused combination of
        arguments (e.g. a glossary with the CTranslate2 engine) a 422.

        Every sentence goes through the micro-batcher (a text's target prefix on its first
        sentence, its constraints as decoding/paragraphs.paragraph_units says); sentences with
        prefixes or constraints share batches only with such sentences."""
        texts = list(texts)
        if constraints and self.translator.engine.name != "native":  # refused before the model is busy
            raise ApiError(422, f"Invalid request: glossary: the {self.translator.engine.name} engine has no "
                                f"constrained search; serve the run directory (native engine) to use one")
        prefixes = None if target_prefix is None or all(p is None for p in target_prefix) else list(target_prefix)
        constraints = list(constraints) if constraints and any(constraints) else None
        if spans is None:
            spans = await self.sentences(texts, limit=max_sentences)
        units = paragraph_units(texts, spans, prefixes, constraints)
        results = await self._guarded(self.batcher.translate(units.texts, options, target_prefix=units.prefixes,
                                                             constraints=units.constraints))
        return join_paragraphs(texts, spans, results, subword=self.translator.subword)

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
