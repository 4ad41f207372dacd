"""Translator: load a trained run and translate sentences, with attention weights.

    from attnmt import Translator
    t = Translator.load("runs/multi30k_rnn")
    result = t.translate(["Ein Hund läuft ."], beam_size=5)[0]
    result.text, result.tokens, result.source_tokens, result.attention  # (tgt_len, src_len)

Any input is accepted: empty or whitespace-only lines give an empty translation, words unknown
to the vocabulary become <unk>, and inputs longer than `search.max_input_tokens` tokens (default
250) are cut there with a warning (and at 20 characters per allowed token before tokenizing);
the result's `warnings` says so. `n_best=K` fills `result.alternatives` with the K best.

    ensemble = Translator.load(["runs/a-seed1", "runs/a-seed2"])   # members' probabilities averaged
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import nn

from attnmt.config import Config
from attnmt.data.batching import make_batches
from attnmt.data.phrases import MAX_WORDS
from attnmt.data.lexicon import CASE_PATTERNS, Lexicon, Lexicons, Normalized, restore_case, with_final_marks
from attnmt.data.pipeline import TextPipeline, pipeline_difference
from attnmt.data.sentences import capitalize_spans, split_sentences as find_sentences
from attnmt.decoding.alignment import replace_unknowns, word_alignment
from attnmt.decoding.confidence import result_features, scored_features, uncalibrated_confidence
from attnmt.decoding.coverage import measure_coverage, measure_parts
from attnmt.decoding.inputs import (LENGTH_BOUND_NOTE, applicable_constraints, check_constraints, check_prefixes,
                                    encode_targets)
from attnmt.decoding.paragraphs import join_paragraphs, paragraph_units
from attnmt.decoding.options import DecodingOptions
from attnmt.decoding.results import Alternative, Engine, ScoreResult, TranslationResult
from attnmt.devices import resolve_device
from attnmt.direction import Direction
from attnmt.engines.native import NativeEngine
from attnmt.errors import AttnmtError, LanguageError
from attnmt.models.ensemble import EnsembleModel
from attnmt.run_dir import RunDir

__all__ = ["Alternative", "DecodingOptions", "ScoreResult", "TranslationResult", "Translator"]

log = logging.getLogger(__name__)


ENGINES = ("native", "ctranslate2")


def refuse_ensemble_engine(members: int, engine: str) -> None:
    """Raises AttnmtError when `engine` cannot decode an ensemble of `members` models (only native can)."""
    if members > 1 and engine != "native":
        raise AttnmtError(f"an ensemble of {members} models needs the native engine (engine='native', CLI: "
                          f"--engine native, with the run directories): the {engine} engine decodes one model")


def load_ensemble(paths: Sequence[str | Path], *, checkpoint: str = "best") -> tuple[EnsembleModel, Config, TextPipeline]:
    """The runs' models as one EnsembleModel (weights `checkpoint` of each), with the first run's
    config and text pipeline.

    Raises:
        AttnmtError: a folder is not a training run, or two runs' tokenizers or vocabularies differ
            (the message names both runs and the first difference).
    """
    runs = [RunDir(p) for p in paths]
    for run in runs:
        run.require_run()
    pipelines = [run.pipeline() for run in runs]
    for run, pipeline in zip(runs[1:], pipelines[1:]):
        difference = pipeline_difference(pipelines[0], pipeline)
        if difference is not None:
            raise AttnmtError(f"cannot ensemble {runs[0].path} and {run.path}: {difference}. The members of an "
                              f"ensemble must share tokenizers and vocabularies: train them from one config "
                              f"(e.g. `attnmt train CONFIG --seeds 1,2,3`)")
    cfgs = [run.config() for run in runs]
    models = [run.load_model(checkpoint, cfg, pipeline) for run, cfg, pipeline in zip(runs, cfgs, pipelines)]
    log.info("ensemble of %d models: %s", len(models), ", ".join(str(run.path) for run in runs))
    return EnsembleModel(models), cfgs[0], pipelines[0]


class Translator:
    """A trained model with its tokenizers and vocabularies, ready to translate, behind an engine.

    `engine` is the decoding engine (decoding.Engine); by default the native PyTorch one over
    `model`. With the CTranslate2 engine `model` is None.
    """

    def __init__(self, model: nn.Module | None, pipeline: TextPipeline, cfg: Config, *,
                 device: torch.device | str = "cpu", run_dir: Path | None = None, engine: Engine | None = None):
        self.model = model.to(device).eval() if model is not None else None
        self.pipeline = pipeline
        self.cfg = cfg
        self.device = torch.device(device)
        self.run_dir = run_dir
        if engine is None:
            if model is None:
                raise ValueError("Translator needs a model or an engine")
            engine = NativeEngine(self.model, pipeline, cfg.search, self.device)
        self.engine = engine
        self.calibration = RunDir(run_dir).calibration() if run_dir is not None else None

    @classmethod
    def load(cls, path: str | Path | Sequence[str | Path], *, checkpoint: str = "best", device: str | None = None,
             engine: str = "native", inter_threads: int | None = None,
             intra_threads: int | None = None) -> Translator:
        """Load a run directory written by `attnmt train` (safetensors + JSON; no pickle) with the
        native engine, or a folder written by `attnmt export` with engine="ctranslate2".

        `inter_threads` / `intra_threads` set CTranslate2's threads (engines/ctranslate2.py
        `thread_settings`: by default torch's threads side by side, one each, on a CPU); the
        native engine refuses them (it uses torch's threads: torch.set_num_threads).

        A list of several run directories loads them as an ensemble (models/ensemble.py: at each
        step the members' probabilities are averaged), native engine only; the members must share
        tokenizers and vocabularies, and the first run's config (search settings, data) is used.

        Raises:
            AttnmtError: unknown engine, a folder the engine cannot load (the message says which
                command makes one it can), or runs that cannot form an ensemble (names the difference).
        """
        paths = [path] if isinstance(path, (str, Path)) else list(path)
        if not paths:
            raise AttnmtError("Translator.load needs a run directory (or a list of them for an ensemble)")
        device = resolve_device(device or "auto", key="device")
        if engine not in ENGINES:
            raise AttnmtError(f"engine={engine!r}: expected one of {', '.join(ENGINES)}")
        if engine == "ctranslate2":
            refuse_ensemble_engine(len(paths), engine)
            from attnmt.engines.ctranslate2 import load_export

            ct2_engine, cfg = load_export(RunDir(paths[0]).path, device=device.type,
                                          inter_threads=inter_threads, intra_threads=intra_threads)
            return cls(None, ct2_engine.pipeline, cfg, device="cpu", run_dir=Path(paths[0]), engine=ct2_engine)
        if inter_threads is not None or intra_threads is not None:
            raise AttnmtError("inter_threads and intra_threads are CTranslate2's (engine='ctranslate2'); "
                              "the native engine uses torch's threads (torch.set_num_threads)")
        if len(paths) > 1:
            model, cfg, pipeline = load_ensemble(paths, checkpoint=checkpoint)
            ensemble = cls(model, pipeline, cfg, device=device, run_dir=Path(paths[0]))
            ensemble.calibration = None  # a member's map is not the ensemble's: its confidence is uncalibrated
            return ensemble
        run = RunDir(paths[0])
        run.require_run()
        cfg, pipeline = run.config(), run.pipeline()
        return cls(run.load_model(checkpoint, cfg, pipeline), pipeline, cfg, device=device, run_dir=run.path)

    @property
    def directions(self) -> list[Direction]:
        """The directions this model translates."""
        languages = self.pipeline.languages
        if languages is not None:
            return list(languages.directions)
        return [Direction(self.cfg.data.src_lang, self.cfg.data.tgt_lang)]

    def target_language(self, source_lang: str | None = None, target_lang: str | None = None) -> str | None:
        """The language a call writes (for the engines: None for a one-direction model), checked.

        Raises:
            LanguageError: a language or direction the model lacks; names its directions.
        """
        languages = self.pipeline.languages
        if languages is not None:
            return languages.resolve(source_lang, target_lang)[1]
        (src, tgt), = self.directions
        if source_lang not in (None, src) or target_lang not in (None, tgt):
            raise LanguageError(f"direction {Direction(source_lang or src, target_lang or tgt)}: this model translates "
                                f"{Direction(src, tgt)} only")
        return None

    def source_language(self, source_lang: str | None = None, target_lang: str | None = None) -> str:
        """The language a call reads (to split its sentences): `source_lang`, else the model's only
        source language (into `target_lang`).

        Raises:
            LanguageError: a multilingual model reads several languages into the target: say which.
        """
        if source_lang is not None:
            return source_lang
        target = self.target_language(source_lang, target_lang)
        sources = sorted({s for s, t in self.directions if target is None or t == target})
        if len(sources) != 1:
            raise LanguageError(f"splitting sentences needs the source language (source_lang; CLI --source-lang): "
                                f"this model reads {', '.join(sources)}")
        return sources[0]

    def sentences(self, text: str, lang: str) -> list[tuple[int, int]]:
        """The sentences of `text` in `lang` (data.sentences.split_sentences), a stretch typed
        without sentence marks split where the model's training data says (data/boundaries.py:
        when its lexicon keeps the counts); the one splitter of the translator and the service."""
        lexicon = self.lexicon_for(lang)
        return find_sentences(text, lang, lexicon.boundaries if lexicon is not None else None)

    def lexicon_for(self, lang: str | None) -> Lexicon | None:
        """The source words a text in `lang` is read with (data/lexicon.py): the run's lexicon, or of
        a multilingual run that language's (None for a language it has none of, or None given)."""
        lexicon = self.pipeline.lexicon
        return lexicon.of(lang) if isinstance(lexicon, Lexicons) else lexicon

    def _reading(self, options: DecodingOptions) -> Lexicon | None:
        """The lexicon of a call's source language: options.source_lang, else the model's only one
        (into options.target_lang); None for a multilingual call that does not say which."""
        if not isinstance(self.pipeline.lexicon, Lexicons):
            return self.pipeline.lexicon
        try:
            return self.lexicon_for(self.source_language(options.source_lang, options.target_lang))
        except LanguageError:
            return None

    @property
    def subword(self) -> bool:
        """Whether tokens are sentencepiece pieces (merged into words for alignments) or words."""
        return self.cfg.data.tokenizer == "sentencepiece"

    @property
    def replaces_unk(self) -> bool:
        """The default of `translate(replace_unk=...)`: search.replace_unk, or (when it is null) on
        for word-level vocabularies (moses), off for sentencepiece (whose pieces rarely give <unk>)."""
        setting = self.cfg.search.replace_unk
        return not self.subword if setting is None else setting

    def decoding_options(self, options: DecodingOptions | None = None, **keywords) -> DecodingOptions:
        """`options` with `keywords` replaced (DecodingOptions.of: checked there), and what is left
        unset taken from this model: beam and length penalty from its search section
        (DecodingOptions.with_defaults), replace_unk by `replaces_unk`."""
        options = DecodingOptions.of(options, **keywords).with_defaults(self.cfg.search)
        return options if options.replace_unk is not None else options.replace(replace_unk=self.replaces_unk)

    def translate(self, sentences: Sequence[str] | str, options: DecodingOptions | None = None, *,
                  target_prefix: Sequence[str | None] | None = None, constraints: Sequence | None = None,
                  **keywords) -> list[TranslationResult]:
        """Translate sentences (a list, or one string) as `options` say (decoding/options.py), or as
        its fields given as keywords (`beam_size=5, alignments=True`); what neither sets is the
        model's own (`decoding_options`). beam_size 1 is greedy search.

        `split_sentences` translates each text as a paragraph: its sentences found by
        data.sentences.split_sentences in the source language, translated in one engine call with
        every other text's, and joined back with the text's own whitespace (decoding/paragraphs.py:
        tokens, attention per sentence, alignment, coverage per sentence in paragraph indices).
        Off by default: a file of one sentence per line translates exactly as before. A target
        prefix goes to a paragraph's first sentence; of its constraints, (source, target) pairs
        apply to every sentence where the source phrase occurs, bare target phrases to the first.

        Every result carries its coverage (decoding/coverage.py): `sentences` (per sentence:
        coverage, length ratio, uncovered source words, flagged), `coverage`, `flagged`, `uncovered`.

        `target_lang` says which language a multilingual model writes (needed when it writes
        several); `source_lang`, when given, must make one of its directions with it; left out, each
        text is read in the language its lexicons find (`unnamed_sources`, Lexicons.identify). A
        one-direction model takes either only as its own languages. A wrong one is a
        LanguageError naming the model's directions.

        `layer` and `head` pick which cross-attention a native Transformer reports (default: the
        mean); the CTranslate2 engine reports the layer chosen at export, averaged over heads.
        `n_best` (at most the beam size) fills each result's `alternatives`, best first.
        `sampling_topk` != 1 samples (with beam_size 1): from the K most probable tokens (0 = all)
        at `sampling_temperature`; `seed` makes it repeatable.
        `replace_unk` (default `replaces_unk`) copies, for each <unk> output token, the source word
        that its attention weighs most; `replaced` lists those positions. `alignments` fills each
        result's (and alternative's) `alignment`: per output word, the source word its attention
        (the one reported, as `layer` / `head` choose) weighs most, pieces merged into words.
        `target_prefix` (one text or None per sentence; a text for a single string) forces the
        start of each translation: its tokens come first, exactly as typed (even words the
        vocabulary lacks), and the model completes them.
        `constraints` (terminology; native engine, greedy or beam, not sampling): per sentence, None or a list of
        target phrases and (source phrase, target phrase) pairs; a pair applies when its source
        phrase occurs in the sentence (as whole tokens, case-sensitive). Each applicable target
        phrase (tokenized with the target tokenizer) appears in the translation exactly once, by
        lexically constrained beam search (decoding/constraints.py); if the output budget runs out first,
        the best hypothesis is returned and its `warnings` name the constraint left out. For a
        single string, `constraints` is that sentence's list. Sentences without constraints
        decode exactly as without the argument.

        Raises:
            TypeError: a keyword that is no decoding option; ValueError: a value out of its range.
        """
        options = self.decoding_options(options, **keywords)
        if isinstance(sentences, str):
            sentences = [sentences]
            target_prefix = [target_prefix] if isinstance(target_prefix, str) else target_prefix
            constraints = None if constraints is None else [constraints]
        sources = self.unnamed_sources(options)
        if sources:
            return self._by_language(list(sentences), sources, options, target_prefix, constraints)
        return self._translate_as(list(sentences), options, target_prefix, constraints)

    def unnamed_sources(self, options: DecodingOptions) -> list[str]:
        """The languages a multilingual call may read when it names none (options.source_lang): those
        its lexicons know that translate into its target; [] for a call that names one, a model of
        one source language into the target, or one without lexicons (a text is then read as typed)."""
        lexicons = self.pipeline.lexicon
        if options.source_lang is not None or not isinstance(lexicons, Lexicons):
            return []
        target = self.target_language(None, options.target_lang)
        sources = sorted({s for s, t in self.directions if t == target and lexicons.of(s) is not None})
        return sources if len(sources) > 1 else []

    def _by_language(self, sentences: list[str], sources: list[str], options: DecodingOptions,
                     target_prefix, constraints) -> list[TranslationResult]:
        """A multilingual call that names no source language: each text read in its own, identified by
        the model's lexicons among `sources` (Lexicons.identify: the language whose training words make
        it likeliest), one call per language, results in input order; a text none of them knows a word
        of is read as typed (no source language: as before)."""
        if target_prefix is not None:  # checked whole: a wrong length is named, not an IndexError
            check_prefixes(target_prefix, len(sentences))
        if constraints is not None:
            check_constraints(constraints, len(sentences))
        languages = [self.pipeline.lexicon.identify(text, sources) if isinstance(text, str) else None
                     for text in sentences]  # not a text: refused below as in any call
        results: list[TranslationResult | None] = [None] * len(sentences)
        for lang in dict.fromkeys(languages):
            where = [i for i, found in enumerate(languages) if found == lang]
            pick = (lambda values: None if values is None else [values[i] for i in where])
            found = self._translate_as([sentences[i] for i in where], options.replace(source_lang=lang),
                                       pick(target_prefix), pick(constraints))
            for i, result in zip(where, found):
                results[i] = result
        return results

    def _translate_as(self, sentences: list[str], options: DecodingOptions, target_prefix, constraints
                      ) -> list[TranslationResult]:
        """`translate` of a list, its options complete and its source language settled."""
        lexicon = self._reading(options)
        seen = self.read_as_trained(list(sentences), lexicon)
        texts = [n.text for n in seen] if seen is not None else list(sentences)
        if not options.split_sentences:
            seen, _ = self.with_final_marks(list(sentences), seen, [[(0, len(text))] for text in texts], lexicon)
            texts = [n.text for n in seen] if seen is not None else texts
            return self._withheld(self._as_typed(self._translate(texts, options, target_prefix, constraints,
                                                                 lexicon=lexicon), seen), list(sentences), options)
        prefix_texts = check_prefixes(target_prefix, len(texts))
        per_text = check_constraints(constraints, len(texts))
        lang = self.source_language(options.source_lang, options.target_lang)
        spans = [self.sentences(text, lang) for text in texts]
        if seen is not None and lexicon.capital_starts:  # read in the training data's case: each
            seen = [dataclasses.replace(n, text=capitalize_spans(n.text, found))  # sentence begins as its do
                    if n.pattern in CASE_PATTERNS else n for n, found in zip(seen, spans)]
        seen, spans = self.with_final_marks(list(sentences), seen, spans, lexicon)
        texts = [n.text for n in seen] if seen is not None else texts
        units = paragraph_units(texts, spans, prefix_texts if target_prefix is not None else None,
                                per_text if constraints is not None else None)
        found_results = self._translate(units.texts, options, units.prefixes, units.constraints, split=True,
                                        lexicon=lexicon)
        results = join_paragraphs(texts, spans, found_results, subword=self.subword)  # confidence: the least sure sentence's
        return self._withheld(self._as_typed(results, seen), list(sentences), options)

    @staticmethod
    def _withheld(results: list[TranslationResult], sources: list[str], options: DecodingOptions
                  ) -> list[TranslationResult]:
        """Results less confident than options.min_confidence: their text the source (or empty), said;
        a result the length bound cut, said (LENGTH_BOUND_NOTE)."""
        for result in results:  # said wherever warnings are shown (the service's answers)
            if result.at_length_bound and LENGTH_BOUND_NOTE not in result.warnings:
                result.warnings.append(LENGTH_BOUND_NOTE)
        if options.min_confidence is None:
            return results
        for result, source in zip(results, sources):
            if result.confidence is not None and result.confidence < options.min_confidence:
                kind = "the source" if options.below_confidence == "source" else "no translation"
                result.warnings.append(f"confidence {result.confidence:.2f} is below min_confidence="
                                       f"{options.min_confidence:g}: {kind} is given instead")
                result.text = source if options.below_confidence == "source" else ""
                result.withheld = True
        return results

    def read_as_trained(self, texts: list[str], lexicon: Lexicon | None) -> list[Normalized] | None:
        """Each text as the model is to read it (data/lexicon.py): in lower case, capitals or title
        case, its words in the training data's case (search.restore_case), and an unknown word one
        slip from a known one mended (search.correct_spelling); None when nothing is to be mended
        (no `lexicon`, both settings are off, or every text reads as typed)."""
        search = self.cfg.search
        if lexicon is None or not (search.restore_case or search.correct_spelling):
            return None
        seen = [lexicon.normalize(text, case=search.restore_case, spelling=search.correct_spelling) for text in texts]
        return seen if any(n.text != n.typed or n.pattern in CASE_PATTERNS for n in seen) else None

    def with_final_marks(self, typed: list[str], seen: list[Normalized] | None, spans: list[list[tuple[int, int]]],
                         lexicon: Lexicon | None) -> tuple[list[Normalized] | None, list[list[tuple[int, int]]]]:
        """Each sentence (spans into each text as read) of more than phrases.MAX_WORDS words typed
        without a final mark, read with the mark its training data's sentences end with
        (search.complete_final_mark, lexicon.final_mark; data/lexicon.py with_final_marks): the
        model saw every caption end with one, and shorter pieces (`data.augment.fragments`) without.
        `seen` and the spans as changed; `seen` stays None when no mark is written."""
        if lexicon is None or lexicon.final_mark is None or not self.cfg.search.complete_final_mark:
            return seen, spans
        base = seen if seen is not None else [Normalized(text, text, "as typed") for text in typed]
        marked = [with_final_marks(n, found, lexicon.final_mark, min_words=MAX_WORDS) for n, found in zip(base, spans)]
        if seen is None and all(n is b for (n, _), b in zip(marked, base)):
            return None, spans
        return [n for n, _ in marked], [found for _, found in marked]

    def _as_typed(self, results: list[TranslationResult], seen: list[Normalized] | None) -> list[TranslationResult]:
        """Results of mended texts (read_as_trained) as the typed ones': each translation (and
        alternative) in its input's case pattern, spans into the typed text, `read_as` set."""
        if seen is None:
            return results
        for result, n in zip(results, seen):
            if n.text == n.typed and n.pattern not in CASE_PATTERNS:
                continue
            for hyp in [result, *result.alternatives]:
                hyp.text = restore_case(hyp.text, n.pattern)
            for sentence in result.sentences:
                sentence.source = (n.to_typed(sentence.source[0]), n.to_typed(sentence.source[1]))
            result.read_as = n.text if n.text != n.typed else None
        return results

    def _translate(self, sentences: list[str], options: DecodingOptions, target_prefix, constraints, *,
                   split: bool = False, lexicon: Lexicon | None = None) -> list[TranslationResult]:
        """translate() of one sentence per text (`split`: each already one sentence of a paragraph);
        a short one the `lexicon`'s phrase table knows by it (`_phrased`), the rest by the engine."""
        prefix_texts = check_prefixes(target_prefix, len(sentences))
        per_sentence = check_constraints(constraints, len(sentences))
        language = self.target_language(options.source_lang, options.target_lang)
        applicable = None
        if any(per_sentence):
            if self.engine.name != "native":
                raise ValueError(f"constraints: the {self.engine.name} engine has no lexically constrained search; "
                                 f"use the native engine (engine='native', CLI: --engine native) with the run "
                                 f"directory")
            applicable = applicable_constraints(self.pipeline, list(sentences), constraints, self.cfg.search)
        phrased = self._phrased(sentences, options, lexicon, prefix_texts, per_sentence, language)
        rest = [i for i in range(len(sentences)) if i not in phrased]
        results: list[TranslationResult | None] = [phrased.get(i) for i in range(len(sentences))]
        if rest:
            decoded = self.engine.translate(
                [sentences[i] for i in rest], options,
                target_prefix=None if target_prefix is None else [prefix_texts[i] for i in rest],
                constraints=None if applicable is None else [applicable[i] for i in rest], target_lang=language)
            for i, result in zip(rest, decoded):
                results[i] = result
        prefixes, _ = encode_targets(self.pipeline, [p or "" for p in prefix_texts], self.cfg.search)
        for sentence, result, prefix in zip(sentences, results, prefixes):
            self._finish(result, prefix, replace_unk=options.replace_unk, alignments=options.alignments)
            self._measure(sentence, result, options, split=split)
            self._confide(result)
        return results

    def _phrased(self, sentences: list[str], options: DecodingOptions, lexicon: Lexicon | None,
                 prefixes: list[str | None], constraints: list, language: str | None) -> dict[int, TranslationResult]:
        """The sentences of one to three words that `lexicon`'s phrase table translates
        (search.short_phrases; not with a target prefix, constraints or sampling), by index: the
        table's translations (n_best of them as alternatives) with the model's forced-decoding
        scores, and its attention where the engine gives one (the native engine's). Its confidence
        is the table's: the share of the phrase's training pieces translated so (uncalibrated: a
        model that never saw a short output finds "dog" improbable, which says nothing of "dog")."""
        if lexicon is None or lexicon.table(language) is None or not self.cfg.search.short_phrases \
                or options.sampling_topk != 1:
            return {}
        found = {i: texts[:options.n_best] for i, text in enumerate(sentences)
                 if not prefixes[i] and not constraints[i] and (texts := lexicon.short_translations(text, language))}
        if not found:
            return {}
        pairs = [(i, text) for i, texts in found.items() for text, _ in texts]
        scored = iter(self.engine.score([sentences[i] for i, _ in pairs], [text for _, text in pairs],
                                        **({} if language is None else {"target_lang": language})))
        results = {}
        for i, texts in found.items():
            hyps, first = [], None
            for (text, share), s in zip(texts, scored):
                first = first or s
                tokens = list(s.target_tokens)
                attention = None if s.attention is None else s.attention[:len(tokens)]  # (len(tokens), src_len)
                hyps.append(Alternative(text, tokens, s.log_prob / max(s.num_tokens, 1), attention,
                                        token_log_probs=list(s.token_log_probs), log_prob=s.log_prob,
                                        confidence=share))
            best = hyps[0]
            results[i] = TranslationResult(best.text, best.tokens, list(first.source_tokens), best.attention,
                                           best.score, alternatives=hyps, warnings=list(first.warnings),
                                           token_log_probs=best.token_log_probs, log_prob=best.log_prob,
                                           confidence=best.confidence, from_phrases=True)
        return results

    def _source_words(self, source_tokens: Sequence[str]) -> int:
        """How many of a result's source tokens are the text's (a Marian source's </s> is not)."""
        return len(source_tokens) - (1 if self.pipeline.source_eos and source_tokens else 0)

    def confidence_features(self, result: TranslationResult, rank: int = 0) -> dict[str, float]:
        """The features that the confidence of one sentence's result (or of its alternative `rank`)
        is made of (decoding/confidence.py)."""
        coverage = None
        if rank:
            hyp = result.alternatives[rank]
            words = self._source_words(result.source_tokens)
            coverage = measure_coverage(hyp.attention, result.source_tokens[:words], hyp.tokens, subword=self.subword,
                                        source=(0, 0), target=(0, 0)).coverage
        return result_features(result, self.pipeline.lexicon, rank=rank, coverage=coverage)

    def scored_confidence(self, result: ScoreResult) -> tuple[float, float | None]:
        """A forced decoding's confidence (Translator.score: a given translation, e.g. a teacher's
        output) and, with a calibration, the chrF its map predicts (the order where confidences
        tie); the features as a search's lone hypothesis has them (decoding/confidence.py)."""
        if result.num_tokens <= 0 or result.log_prob != result.log_prob:  # an empty source: no score
            return 0.0, (None if self.calibration is None else -math.inf)
        words = self._source_words(result.source_tokens)
        attention = None if result.attention is None else result.attention[:len(result.target_tokens)]
        coverage = measure_coverage(attention, result.source_tokens[:words], result.target_tokens,
                                    subword=self.subword, source=(0, 0), target=(0, 0)).coverage
        features = scored_features(result, self.pipeline.lexicon, coverage=coverage)
        if self.calibration is None:
            return uncalibrated_confidence(features), None
        return self.calibration.confidence(features), self.calibration.predicted_chrf(features)

    def _confide(self, result: TranslationResult) -> None:
        """The result's confidence, and each alternative's: the calibration's map of its features
        (attnmt calibrate), or without one the mean token probability (confidence_calibrated False)."""
        def confidence(features: dict[str, float]) -> float:
            if self.calibration is not None:
                return self.calibration.confidence(features)
            return uncalibrated_confidence(features)

        if result.from_phrases:  # the phrase table's share, set by _phrased
            result.confidence_calibrated = False
            return
        result.confidence = confidence(self.confidence_features(result))
        result.confidence_calibrated = self.calibration is not None
        for rank, hyp in enumerate(result.alternatives):  # the first is the translation itself
            hyp.confidence = result.confidence if rank == 0 else confidence(self.confidence_features(result, rank))

    def _measure(self, sentence: str, result: TranslationResult, options: DecodingOptions, *,
                 split: bool = False) -> None:
        """The result's coverage (decoding/coverage.py): per source sentence of `sentence` (found by
        data.sentences.split_sentences; the whole text when it is one sentence, when `split` says
        it already is one (a paragraph's sentence), or when its sentences' tokens do not add up to
        the source's, e.g. a cut input)."""
        words = self._source_words(result.source_tokens)
        source_tokens = result.source_tokens[:words]
        stripped = sentence.strip()
        start = len(sentence) - len(sentence.lstrip())
        parts = [((start, start + len(stripped)), 0, len(source_tokens))]
        spans = []
        if not split:
            try:
                spans = self.sentences(sentence, self.source_language(options.source_lang, options.target_lang))
            except LanguageError:  # a multilingual model's call without its source language: one part
                pass
        if len(spans) > 1:
            counts = [len(self.pipeline.src_tokenizer.tokenize(sentence[a:b])) for a, b in spans]
            if sum(counts) == len(source_tokens):
                ends = list(itertools.accumulate(counts))
                parts = [(span, end - count, end) for span, count, end in zip(spans, counts, ends)]
        result.sentences = measure_parts(result.attention, source_tokens, result.tokens, subword=self.subword,
                                         parts=parts, target=(0, len(result.text)))
        result.summarize_coverage()

    def _finish(self, result: TranslationResult, prefix: list[str], *, replace_unk: bool, alignments: bool) -> None:
        """Put the prefix's own tokens back (the engines see words the vocabulary lacks as <unk>),
        replace the other <unk>s and add word alignments, in the result and each alternative."""
        # a Marian source's </s> is no word: left out of <unk> replacement and alignments
        words = self._source_words(result.source_tokens)
        for hyp in [result, *result.alternatives]:
            if hyp.attention is None:
                continue
            tokens, replaced = list(hyp.tokens), []
            if prefix and tokens[:len(prefix)] != prefix:
                tokens[:len(prefix)] = prefix
            if replace_unk:
                tokens, replaced = replace_unknowns(tokens, result.source_tokens[:words],
                                                    hyp.attention[:, :words], subword=self.subword, start=len(prefix))
            if tokens != hyp.tokens:
                hyp.tokens, hyp.text, hyp.replaced = tokens, self.pipeline.target_text(tokens), replaced
            if alignments:
                hyp.alignment = word_alignment(hyp.attention[:, :words], result.source_tokens[:words], hyp.tokens,
                                               subword=self.subword)

    def score(self, sources: Sequence[str], targets: Sequence[str], *, batch_size: int = 64,
              source_lang: str | None = None, target_lang: str | None = None) -> list[ScoreResult]:
        """Forced decoding: each (source, translation) pair's log-probability (<eos> included),
        its length-normalized score and token count; in input order. `source_lang` /
        `target_lang` as in `translate`."""
        language = self.target_language(source_lang, target_lang)
        options = {} if language is None else {"target_lang": language}
        return self.engine.score(list(sources), list(targets), batch_size=batch_size, **options)

    def evaluate(self, split: str = "test_2016_flickr", options: DecodingOptions | None = None, *,
                 translate: Callable[..., list] | None = None, **keywords) -> dict:
        """BLEU, chrF (cased, detokenized; sacreBLEU signature), lowercased BLEUs and perplexity,
        decoded as `options` (or its fields as keywords) say, the model's own settings for the rest
        (batch_size 128 unless given). `translate` (default this translator's) decodes the split
        instead, with the same options: e.g. a workers.WorkerPool's over the same run. A
        multilingual model is evaluated on one of its directions (`source_lang` and `target_lang`,
        both needed: the test files are a pair's)."""
        from attnmt.data.corpus import corpus_spec, load_corpus
        from attnmt.evaluation import corpus_loss, perplexity, score_translations

        options = self.decoding_options(options or DecodingOptions(batch_size=128), **keywords)
        direction = self._evaluated_direction(options.source_lang, options.target_lang)
        corpus = load_corpus(corpus_spec(self.cfg.data), split, direction)
        multilingual = self.pipeline.languages is not None
        if not multilingual:
            options = options.replace(source_lang=None, target_lang=None)
        results = (translate or self.translate)(corpus.src, options)
        beam = options.beam_size
        report = {"split": split, **({"pair": str(Direction(*direction))} if multilingual else {}),
                  "sentences": len(corpus.src), "beam": beam,
                  "length_penalty": options.length_penalty if beam > 1 else None,
                  "replace_unk": options.replace_unk}
        report.update(score_translations([r.text for r in results], corpus.tgt, tgt_lang=direction[1]))
        vocab = self.pipeline.tgt_vocab
        languages = dict(source_lang=direction[0], target_lang=direction[1]) if multilingual else {}
        batch_size = options.batch_size
        if self.model is not None:
            target = direction[1] if multilingual else None
            batches = make_batches(self.pipeline.encode_corpus(corpus, target), batch_size=batch_size, shuffle=False,
                                   pad_id=vocab.pad_id, bos_id=vocab.bos_id, eos_id=vocab.eos_id)
            forced_first = target is not None and bool(self.pipeline.language_ids(target)[1])  # a token not scored
            nll, tokens = corpus_loss(self.model, batches, self.device, pad_id=vocab.pad_id, forced_first=forced_first)
        else:  # forced decoding through the engine gives the same sums
            scored = self.score(corpus.src, corpus.tgt, batch_size=batch_size, **languages)
            nll, tokens = -sum(r.log_prob for r in scored), sum(r.num_tokens for r in scored)
        report["engine"] = self.engine.name
        report["ppl"] = round(perplexity(nll, tokens), 2)
        return report

    def _evaluated_direction(self, source_lang: str | None, target_lang: str | None) -> tuple[str, str]:
        if self.pipeline.languages is None:
            self.target_language(source_lang, target_lang)
            return self.directions[0]
        if source_lang is None or target_lang is None:
            raise LanguageError(f"evaluating a multilingual model needs a direction (source_lang and target_lang; "
                                f"CLI: --pair SRC-TGT or --pair all): it has {self.pipeline.languages.names()}")
        self.target_language(source_lang, target_lang)
        return source_lang, target_lang
