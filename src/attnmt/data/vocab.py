"""Token <-> id vocabulary with the specials `<pad>`=0 `<unk>`=1 `<bos>`=2 `<eos>`=3.

Regular tokens follow the specials by descending frequency, ties broken by the token string, so
the same data always gives the same ids. Saved as JSON (the token list, in id order).

A vocabulary taken from elsewhere (an imported Marian model: `</s>`=0, `<unk>`=1, ..., `<pad>`
last, and decoding starts from `<pad>`) keeps its own order: `specials` names which of its
tokens play the four roles (bos may be the pad token), and `suppressed` the tokens that search
never produces. Both are saved with the token list; attnmt's own vocabularies have neither.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from itertools import chain
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from attnmt.errors import DataError
from attnmt.files import write_json


class Vocab:
    """A fixed token list; a token's id is its position.

    Args:
        tokens: every token in id order, starting with `Vocab.SPECIALS` (unless `specials`).
        specials: {"pad": token, "unk": token, "bos": token, "eos": token}, tokens of `tokens`
            anywhere in it (bos may equal pad, as in Marian); None = attnmt's layout.
        suppressed: tokens that search never produces (Marian's `bad_words_ids`).

    Raises:
        ValueError: the specials are not first (or not in `tokens`), or a token appears twice.
    """

    PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
    SPECIALS = (PAD, UNK, BOS, EOS)
    ROLES = ("pad", "unk", "bos", "eos")
    pad_id, unk_id, bos_id, eos_id = 0, 1, 2, 3

    def __init__(self, tokens: Sequence[str], *, specials: dict[str, str] | None = None,
                 suppressed: Sequence[str] = ()):
        tokens = list(tokens)
        if specials is None and tuple(tokens[:len(self.SPECIALS)]) != self.SPECIALS:
            raise ValueError(f"a vocabulary starts with {self.SPECIALS}, got {tuple(tokens[:4])}")
        self.itos: list[str] = tokens
        self.stoi: dict[str, int] = {token: i for i, token in enumerate(tokens)}
        if len(self.stoi) != len(tokens):
            duplicates = [t for t, n in Counter(tokens).items() if n > 1]
            raise ValueError(f"duplicate tokens in vocabulary: {duplicates[:5]}")
        self.specials = None if specials is None else self._own_specials(specials)
        missing = [t for t in suppressed if t not in self.stoi]
        if missing:
            raise ValueError(f"suppressed tokens {missing[:5]} are not in the vocabulary")
        self.suppressed: tuple[str, ...] = tuple(suppressed)
        self.suppressed_ids: tuple[int, ...] = tuple(self.stoi[t] for t in suppressed)

    def _own_specials(self, specials: dict[str, str]) -> dict[str, str]:
        """Set this vocabulary's special tokens and ids from {role: token}."""
        if (not isinstance(specials, dict) or sorted(map(str, specials)) != sorted(self.ROLES)
                or not all(isinstance(token, str) for token in specials.values())):
            raise ValueError(f"specials must name a token for each of {', '.join(self.ROLES)}; got {specials!r}")
        absent = {role: token for role, token in specials.items() if token not in self.stoi}
        if absent:
            raise ValueError(f"special tokens not in the vocabulary: {absent}")
        if len({specials[role] for role in ("pad", "unk", "eos")}) != 3 or specials["bos"] in (specials["unk"],
                                                                                             specials["eos"]):
            raise ValueError(f"pad, unk and eos must be different tokens, and bos one of its own or pad: {specials}")
        self.PAD, self.UNK, self.BOS, self.EOS = (specials[role] for role in self.ROLES)
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = (self.stoi[specials[role]] for role in self.ROLES)
        return dict(specials)

    @classmethod
    def build(cls, token_lists: Iterable[Iterable[str]], *, min_freq: int = 1,
              max_size: int | None = None) -> Vocab:
        """Count tokens and keep the frequent ones (see `from_counts`).

        Args:
            token_lists: tokenized sentences.
        """
        return cls.from_counts(Counter(chain.from_iterable(token_lists)), min_freq=min_freq, max_size=max_size)

    @classmethod
    def from_counts(cls, counts: Mapping[str, int], *, min_freq: int = 1, max_size: int | None = None,
                    reserved: Sequence[str] = ()) -> Vocab:
        """The vocabulary of tokens counted `counts[token]` times: the specials, the `reserved`
        tokens (a multilingual model's language tokens), then the tokens seen at least `min_freq`
        times by descending count, ties by the token string.

        Args:
            counts: token -> occurrences (the specials' and reserved tokens' counts are ignored).
            min_freq: keep tokens seen at least this often.
            max_size: keep at most this many regular tokens (the specials and reserved tokens come
                on top); None keeps all.
            reserved: tokens that follow the specials whatever their counts.
        """
        if min_freq < 1:
            raise ValueError(f"min_freq={min_freq} must be >= 1")
        if max_size is not None and max_size < 0:
            raise ValueError(f"max_size={max_size} must be >= 0")
        specials = set(cls.SPECIALS) | set(reserved)
        kept = sorted((t for t, n in counts.items() if n >= min_freq and t not in specials),
                      key=lambda t: (-counts[t], t))
        if max_size is not None:
            kept = kept[:max_size]
        return cls([*cls.SPECIALS, *reserved, *kept])

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Vocab) and self.itos == other.itos and self.specials == other.specials
                and self.suppressed == other.suppressed)

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens)"

    def encode(self, tokens: Iterable[str], *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Ids of `tokens`; unknown tokens map to `unk_id`."""
        unk = self.unk_id
        ids = [self.stoi.get(token, unk) for token in tokens]
        if add_bos:
            ids.insert(0, self.bos_id)
        if add_eos:
            ids.append(self.eos_id)
        return ids

    def decode(self, ids: Iterable[int], *, strip_special: bool = True) -> list[str]:
        """Tokens of `ids` (a list or a 1-d tensor).

        With `strip_special`, decoding stops at the first `<eos>` and drops `<pad>` and `<bos>`;
        `<unk>` is kept because it stands for a real word.

        Raises:
            ValueError: an id outside the vocabulary.
        """
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        tokens = []
        for i in ids:
            if not 0 <= i < len(self.itos):
                raise ValueError(f"id {i} outside the vocabulary of {len(self.itos)} tokens")
            if strip_special:
                if i == self.eos_id:
                    break
                if i in (self.pad_id, self.bos_id):
                    continue
            tokens.append(self.itos[i])
        return tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: `{"tokens": [...]}` in id order (plus "specials" and "suppressed" when set)."""
        d: dict[str, Any] = {"tokens": list(self.itos)}
        if self.specials is not None:
            d["specials"] = dict(self.specials)
        if self.suppressed:
            d["suppressed"] = list(self.suppressed)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Vocab:
        """Inverse of `to_dict`.

        Raises:
            ValueError: not a vocabulary (wrong types, specials not in it, ...).
        """
        suppressed = d.get("suppressed", [])
        if not isinstance(suppressed, list) or not all(isinstance(t, str) for t in suppressed):
            raise ValueError(f"'suppressed' must be a list of tokens, got {suppressed!r:.80}")
        if not all(isinstance(t, str) for t in d["tokens"]):
            raise ValueError("'tokens' must be a list of strings")
        return cls(d["tokens"], specials=d.get("specials"), suppressed=suppressed)

    def save(self, path: str | os.PathLike) -> None:
        """Write the vocabulary as JSON, atomically (files.atomic_write)."""
        write_json(path, self.to_dict(), indent=0)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Vocab:
        """Read a vocabulary written by `save`.

        Raises:
            DataError: missing file, invalid JSON, or not a vocabulary.
        """
        path = Path(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"{path}: vocabulary file not found") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DataError(f"{path}: not a JSON vocabulary ({err})") from None
        if not isinstance(d, dict) or not isinstance(d.get("tokens"), list):
            raise DataError(f"{path}: not a vocabulary (expected {{\"tokens\": [...]}})")
        try:
            return cls.from_dict(d)
        except ValueError as err:
            raise DataError(f"{path}: {err}") from None
