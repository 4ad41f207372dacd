"""The languages of a multilingual model: its directions, the token that names each target
language, where that token goes, and how often each direction is sampled in training.

    <2fr>   the token of French, in the vocabulary right after the specials. With
            placement "source" it is the first source token (Johnson et al. 2017, OPUS-MT's
            >>fra<<); with "target" it is the first target token, forced when decoding
            (fairseq's --decoder-langtok, NLLB). Either way the model learns which language to
            write from that one token; everything else is shared.

Sampling over directions with a temperature T (fairseq's translation_multi_simple_epoch,
Arivazhagan et al. 2019): direction d, with n_d training pairs, is drawn with probability
p_d = n_d^(1/T) / sum_e n_e^(1/T). T = 1 samples by size, larger T flattens toward uniform. An
epoch keeps its total number of examples, so direction d takes p_d x sum_e n_e of them: its
`temperature_weights` entry is that over n_d (above 1: repeated; below 1: a random share).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from attnmt.direction import Direction, is_language
from attnmt.direction import names as direction_names
from attnmt.errors import DataError, LanguageError

PLACEMENTS = ("source", "target")


def lang_token(lang: str) -> str:
    """The vocabulary token that names `lang`: <2de>, <2fr>, ..."""
    return f"<2{lang}>"


def is_lang_token(token: str) -> bool:
    """Whether `token` has the form of a language token (<2en>, <2pt_BR>), in any vocabulary."""
    return token.startswith("<2") and token.endswith(">") and is_language(token[2:-1])


@dataclass(frozen=True)
class Languages:
    """The directions of a multilingual model, and where its language token goes (None: not chosen
    yet, in prepared data, whose ids do not hold the tokens)."""

    directions: tuple[Direction, ...]
    placement: str | None = None

    @property
    def codes(self) -> list[str]:
        """Every language of the model, sorted."""
        return sorted({lang for pair in self.directions for lang in pair})

    def tokens(self) -> list[str]:
        """The language tokens, one per language, in `codes` order (they join the vocabulary)."""
        return [lang_token(lang) for lang in self.codes]

    def names(self) -> str:
        return direction_names(self.directions)

    def resolve(self, source_lang: str | None, target_lang: str | None) -> tuple[str | None, str]:
        """The direction a call asks for: `target_lang` required unless the model writes one
        language; `source_lang`, when given, must make a direction the model was trained on.

        Raises:
            LanguageError: a missing, unknown or untrained language or direction; names the model's directions.
        """
        targets = sorted({t for _, t in self.directions})
        if target_lang is None:
            if len(targets) > 1:
                raise LanguageError(f"this model writes {', '.join(targets)}: say which (target_lang; CLI "
                                  f"--target-lang). Its directions: {self.names()}")
            target_lang = targets[0]
        if target_lang not in targets:
            raise LanguageError(f"target language {target_lang!r}: this model writes {', '.join(targets)} "
                              f"(its directions: {self.names()})")
        if source_lang is not None and (source_lang, target_lang) not in self.directions:
            raise LanguageError(f"direction {Direction(source_lang, target_lang)}: this model was trained on {self.names()}")
        return source_lang, target_lang

    def with_placement(self, placement: str) -> Languages:
        if placement not in PLACEMENTS:
            raise ValueError(f"placement={placement!r}: expected one of {PLACEMENTS}")
        return Languages(self.directions, placement)

    def to_dict(self) -> dict:
        return {"directions": [str(d) for d in self.directions], "placement": self.placement}

    @classmethod
    def from_dict(cls, d: object, source: str) -> Languages:
        """Inverse of `to_dict`.

        Raises:
            DataError: not of that shape; names `source`.
        """
        if not isinstance(d, dict) or not isinstance(d.get("directions"), list) or not d["directions"]:
            raise DataError(f"{source}: 'languages' must hold a list of directions")
        directions = [Direction.parse(text, f"{source}: languages.directions[{i}]", error=DataError)
                      for i, text in enumerate(d["directions"])]
        placement = d.get("placement")
        if placement is not None and placement not in PLACEMENTS:
            raise DataError(f"{source}: languages.placement={placement!r} must be one of {', '.join(PLACEMENTS)}")
        return cls(tuple(directions), placement)


def temperature_weights(sizes: Sequence[int], temperature: float) -> list[float]:
    """Per direction, examples per epoch over its pairs, so that direction d makes a share
    p_d = n_d^(1/T) / sum_e n_e^(1/T) of an epoch of sum_e n_e examples (module docstring).
    A direction with no pairs gets weight 0.

    Raises:
        ValueError: temperature <= 0.
    """
    if not temperature > 0:
        raise ValueError(f"temperature={temperature} must be positive")
    total = sum(sizes)
    powered = [n ** (1.0 / temperature) if n else 0.0 for n in sizes]
    norm = sum(powered)
    return [(p / norm) * total / n if n else 0.0 for p, n in zip(powered, sizes)]
