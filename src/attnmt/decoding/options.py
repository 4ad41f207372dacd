"""How to decode: one frozen value that every surface builds once and passes whole down to the search.

    options = DecodingOptions(beam_size=5, n_best=2, alignments=True)   # checked here, once
    translator.translate(["Ein Hund läuft ."], options)                  # or the keywords themselves
    options.with_defaults(cfg.search).beam_size                          # None -> the model's own

Each verb builds it from its arguments (commands/arguments.decoding_options), the service from
the request body (server/service.TranslationService.options_for), distillation from its
settings, the Python API from `Translator.translate`'s keywords (`DecodingOptions.of`). Every
number is checked against bounds.py at construction, so no surface checks it again, and a value
the user did not give is None until `with_defaults` fills it from the model's `search` section:
one default rule (a student whose config says `beam_size: 1` decodes greedily everywhere).

What travels per sentence (target prefixes, terminology constraints) is data, not options: it
goes beside this value, never inside it. Equal options hash alike: the service's micro-batcher
puts only sentences with equal options into one batch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from attnmt.bounds import BEAM, CONFIDENCE, DECODING_SEED, LENGTH_PENALTY, SAMPLING_TEMPERATURE, SAMPLING_TOPK
from attnmt.config import SearchConfig
from attnmt.direction import check_language

__all__ = ["DecodingOptions"]


@dataclass(frozen=True)
class DecodingOptions:
    """Decoding settings, checked on construction (ValueError naming the field).

    Attributes:
        beam_size: hypotheses kept per sentence (1 = greedy); None: the model's search.beam_size
            (1 when sampling).
        length_penalty: GNMT alpha of the beam's ranking; None: the model's search.length_penalty.
        n_best: hypotheses returned per sentence (`alternatives`), at most the beam.
        sampling_topk: != 1 samples (with beam 1) from the K most probable tokens (0 = all),
            at `sampling_temperature`; `seed` makes the draws repeatable.
        batch_size: sentences per model call.
        layer, head: which cross-attention a native Transformer reports (None: the mean).
        replace_unk: copy the most attended source word for each <unk>; None: the model's rule
            (search.replace_unk; when that is null, on for words, off for sentencepiece).
        alignments: fill each result's word alignment.
        split_sentences: translate each text as a paragraph, sentence by sentence.
        source_lang, target_lang: the direction of a multilingual model (None: its only one).
        min_confidence: a translation less confident than this (decoding/confidence.py) is not given:
            its text is the source (`below_confidence` "source") or empty ("empty"), with a warning.
    """

    beam_size: int | None = None
    length_penalty: float | None = None
    n_best: int = 1
    sampling_topk: int = 1
    sampling_temperature: float = 1.0
    seed: int | None = None
    batch_size: int = 64
    layer: int | None = None
    head: int | None = None
    replace_unk: bool | None = None
    alignments: bool = False
    split_sentences: bool = False
    source_lang: str | None = None
    target_lang: str | None = None
    min_confidence: float | None = None
    below_confidence: str = "source"

    def __post_init__(self) -> None:
        if self.beam_size is not None:
            BEAM.check("beam_size", self.beam_size)
        BEAM.check("n_best", self.n_best)
        if self.beam_size is not None and self.n_best > self.beam_size:
            raise ValueError(f"n_best={self.n_best} must be between 1 and beam_size={self.beam_size}")
        SAMPLING_TOPK.check("sampling_topk", self.sampling_topk)
        if self.sampling_topk != 1 and self.beam_size not in (None, 1):
            raise ValueError(f"sampling (sampling_topk={self.sampling_topk}) draws one translation: it needs "
                             f"beam_size=1, got {self.beam_size}")
        SAMPLING_TEMPERATURE.check("sampling_temperature", self.sampling_temperature)
        if self.length_penalty is not None:
            LENGTH_PENALTY.check("length_penalty", self.length_penalty)
        if self.seed is not None:
            DECODING_SEED.check("seed", self.seed)
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size!r} must be a positive integer")  # no bound: a batch
            # larger than the input is the input (length_sorted_chunks)
        for name in ("layer", "head"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{name}={value!r} must be an integer index or None")
        for name in ("replace_unk",):
            if getattr(self, name) not in (None, True, False):
                raise ValueError(f"{name}={getattr(self, name)!r} must be true, false or None")
        for name in ("alignments", "split_sentences"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r} must be true or false")
        for name in ("source_lang", "target_lang"):
            if getattr(self, name) is not None:
                check_language(getattr(self, name), name)
        if self.min_confidence is not None:
            CONFIDENCE.check("min_confidence", self.min_confidence)
        if self.below_confidence not in ("source", "empty"):
            raise ValueError(f"below_confidence={self.below_confidence!r} must be 'source' or 'empty'")

    @classmethod
    def of(cls, options: DecodingOptions | None = None, **keywords) -> DecodingOptions:
        """`options` (default: all defaults) with `keywords` replaced: the one place keywords become
        the value (Translator.translate's convenience).

        Raises:
            TypeError: a keyword that is no field (as any Python call with a wrong keyword).
            ValueError: a value out of its range, naming the field.
        """
        if options is not None and not isinstance(options, DecodingOptions):
            raise TypeError(f"options must be a DecodingOptions, not {type(options).__name__}")
        base = options if options is not None else cls()
        return dataclasses.replace(base, **keywords) if keywords else base

    @property
    def sampling(self) -> bool:
        return self.sampling_topk != 1

    def with_defaults(self, search: SearchConfig) -> DecodingOptions:
        """The options with what the user left unset (None) taken from the model's search section:
        beam_size (1 when sampling) and length_penalty. The one default rule; engines call it too,
        so options that arrive unresolved decode as the model says."""
        beam = self.beam_size if self.beam_size is not None else (1 if self.sampling else search.beam_size)
        alpha = self.length_penalty if self.length_penalty is not None else search.length_penalty
        if beam == self.beam_size and alpha == self.length_penalty:
            return self
        return dataclasses.replace(self, beam_size=beam, length_penalty=alpha)

    def replace(self, **changes) -> DecodingOptions:
        """A copy with `changes` (checked again)."""
        return dataclasses.replace(self, **changes)
