"""A language code and a translation direction: one rule for each, one spelling.

A direction is written "de-en" everywhere a person or a file names one (a config's data.pairs, the
CLI's --pair, a run's manifest and tokenizers.json, report keys) and is a `Direction(source,
target)` everywhere else. `Direction.parse` is the only reader of that text and `str(direction)`
its only writer; in running prose (the service's and the CLI's messages: "this server translates
de -> en, en -> de") it is `direction.arrow`.
"""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple

# de, fra, pt_BR: what a language token (<2de>) and a file suffix (train.de) can hold
LANG_CODE = re.compile(r"[a-z]{2,3}(_[A-Za-z0-9]{2,8})?")
LANG_CODE_EXAMPLES = "de, en, fra, pt_BR, ..."


def _shown(value: object, where: str) -> str:
    """`where=value` for a message ('value' alone without `where`), at most about 60 characters of the value."""
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{where}={text}" if where else text


def is_language(text: object) -> bool:
    return isinstance(text, str) and LANG_CODE.fullmatch(text) is not None


def base_language(code: str) -> str:
    """The language of a code without its region or script: pt_BR -> pt, de -> de."""
    return code.split("_", 1)[0]


def check_language(text: object, where: str, *, error: type[Exception] = ValueError) -> str:
    """`text` if it is a language code.

    Raises:
        error: naming `where`, e.g. "data.langs[2]='German' must be a language code (de, en, ...)".
    """
    if not is_language(text):
        raise error(f"{_shown(text, where)} must be a language code ({LANG_CODE_EXAMPLES})")
    return text  # type: ignore[return-value]


class Direction(NamedTuple):
    """Translate from `source` into `target` (two different language codes)."""

    source: str
    target: str

    @classmethod
    def parse(cls, text: object, where: str, *, error: type[Exception] = ValueError) -> Direction:
        """"de-en" -> Direction("de", "en").

        Raises:
            error: `text` is not two different language codes joined by '-'; names `where`.
        """
        parts = text.split("-") if isinstance(text, str) else []
        if len(parts) != 2 or not all(map(is_language, parts)) or parts[0] == parts[1]:
            raise error(f"{_shown(text, where)} must be two different language codes joined by '-', e.g. de-en")
        return cls(parts[0], parts[1])

    def __str__(self) -> str:
        return f"{self.source}-{self.target}"

    @property
    def arrow(self) -> str:
        """The direction in a sentence: "de -> en"."""
        return f"{self.source} -> {self.target}"


def language_args(direction: Direction | None) -> dict:
    """Translator.translate's source_lang / target_lang for `direction`; none for None (the model's own)."""
    return {} if direction is None else dict(source_lang=direction.source, target_lang=direction.target)


def names(directions: Iterable[tuple[str, str]]) -> str:
    """"de-en, en-de": directions as a message lists them."""
    return ", ".join(str(Direction(*d)) for d in directions)
