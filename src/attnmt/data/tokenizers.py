"""Tokenizers: Moses words (sacremoses) or sentencepiece subwords, with JSON-able settings.

Every tokenizer follows the `Tokenizer` protocol: `tokenize(text) -> tokens`,
`detokenize(tokens) -> text` and `to_dict()`, which `tokenizer_from_dict(d, base_dir)` turns back
into the same tokenizer (a run saves it next to its checkpoints).

Sentencepiece models are trained by `train_sentencepiece` into a cache folder under a name
derived from a sha256 of the training text and settings, so training twice on the same data is
a cache hit. A joint model (source + target text, one shared vocabulary) or one model per
language is the caller's choice: pass the texts accordingly.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Protocol, runtime_checkable

from attnmt.errors import DataError
from attnmt.files import atomic_copy

logger = logging.getLogger(__name__)

SENTENCEPIECE_MODEL_TYPES = ("bpe", "unigram")
WORD_START = "\u2581"  # sentencepiece's mark of a piece that starts a word ("▁")


@runtime_checkable
class Tokenizer(Protocol):
    """Text <-> tokens. `to_dict()` gives JSON settings that `tokenizer_from_dict` rebuilds."""

    lowercase: bool  # text is lowercased before tokenizing (the model never writes capitals)

    def tokenize(self, text: str) -> list[str]: ...

    def detokenize(self, tokens: list[str]) -> str: ...

    def to_dict(self) -> dict: ...


class MosesTokenizer:
    """Moses word tokenizer (sacremoses), optionally lowercasing.

    Tokens are not XML-escaped (`escape=False`) and dashes are not split, so that detokenizing
    gives back the original text for ordinary sentences.

    Args:
        lang: language code for the Moses non-breaking prefixes (de, en, fr, cs, ...).
        lowercase: lowercase the text before tokenizing (detokenizing cannot undo that).
    """

    def __init__(self, lang: str, lowercase: bool = False):
        from sacremoses import MosesDetokenizer
        from sacremoses import MosesTokenizer as _Moses

        self.lang = lang
        self.lowercase = lowercase
        self._tokenizer = _Moses(lang=lang)
        self._detokenizer = MosesDetokenizer(lang=lang)

    def tokenize(self, text: str) -> list[str]:
        """Split `text` into Moses tokens (lowercased if configured)."""
        if self.lowercase:
            text = text.lower()
        return self._tokenizer.tokenize(text, escape=False, aggressive_dash_splits=False)

    def detokenize(self, tokens: list[str]) -> str:
        """Join Moses tokens back into text (spacing around punctuation restored)."""
        return self._detokenizer.detokenize(list(tokens), unescape=False)

    def to_dict(self) -> dict:
        return {"type": "moses", "lang": self.lang, "lowercase": self.lowercase}

    def __repr__(self) -> str:
        return f"MosesTokenizer(lang={self.lang!r}, lowercase={self.lowercase})"


class SentencePieceTokenizer:
    """Sentencepiece subwords: encodes text as pieces (`▁The`, `▁ca`, `t`), decodes pieces.

    Args:
        model_file: a `.model` file, e.g. from `train_sentencepiece`.
        lowercase: lowercase the text before encoding (for a model trained on lowercased text;
            decoding cannot undo it).

    Raises:
        DataError: the model file is missing or not a sentencepiece model.
    """

    def __init__(self, model_file: str | os.PathLike, lowercase: bool = False):
        import sentencepiece as spm

        self.model_file = Path(model_file)
        self.lowercase = lowercase
        if not self.model_file.is_file():
            raise DataError(f"{self.model_file}: sentencepiece model not found")
        try:
            self._processor = spm.SentencePieceProcessor(model_file=str(self.model_file))
        except (RuntimeError, OSError) as err:
            raise DataError(f"{self.model_file}: not a sentencepiece model ({err})") from None

    @property
    def vocab_size(self) -> int:
        """Number of pieces in the sentencepiece model."""
        return self._processor.get_piece_size()

    def tokenize(self, text: str) -> list[str]:
        """Encode `text` (lowercased if configured) as sentencepiece pieces."""
        return self._processor.encode(text.lower() if self.lowercase else text, out_type=str)

    def detokenize(self, tokens: list[str]) -> str:
        """Decode pieces back to text."""
        return self._processor.decode_pieces(list(tokens))

    def piece_ids(self, texts: list[str]) -> list[list[int]]:
        """The pieces of each text as the model's piece ids (`pieces()[i]` is piece i; a character
        the model does not know is the id of `<unk>`), in one call on this thread."""
        if self.lowercase:
            texts = [text.lower() for text in texts]
        return self._processor.encode(texts, out_type=int, num_threads=1)

    def pieces(self) -> list[str]:
        """Every piece of the model, in id order."""
        return [self._processor.id_to_piece(i) for i in range(self.vocab_size)]

    def to_dict(self, base_dir: str | os.PathLike | None = None) -> dict:
        """Settings with the model file relative to `base_dir` (default: the bare file name).

        The caller keeps the model file in the folder later given to `tokenizer_from_dict`
        (`copy_model_to` does that).
        """
        if base_dir is None:
            model = self.model_file.name
        else:
            model = os.path.relpath(self.model_file.resolve(), Path(base_dir).resolve())
        return {"type": "sentencepiece", "model_file": Path(model).as_posix(),
                **({"lowercase": True} if self.lowercase else {})}  # absent: false (files before it existed)

    def copy_model_to(self, base_dir: str | os.PathLike) -> SentencePieceTokenizer:
        """Copy the model file into `base_dir` and return a tokenizer that uses the copy."""
        target = Path(base_dir) / self.model_file.name
        if target.resolve() != self.model_file.resolve():
            atomic_copy(self.model_file, target)
        return SentencePieceTokenizer(target, lowercase=self.lowercase)

    def __repr__(self) -> str:
        return f"SentencePieceTokenizer({str(self.model_file)!r}, lowercase={self.lowercase})"


def tokenizer_from_dict(d: dict[str, Any], base_dir: str | os.PathLike, *, source: str = "tokenizer settings") -> Tokenizer:
    """Rebuild a tokenizer from its `to_dict()`; sentencepiece model paths are under `base_dir`,
    and a path that leaves it is refused before anything is opened.

    Raises:
        DataError: unknown tokenizer type, missing or wrongly typed settings; names `source`.
    """
    kind = d.get("type")
    if kind == "moses":
        if not isinstance(d.get("lang"), str):
            raise DataError(f"{source}: 'lang' must be a language code, got {d.get('lang')!r}")
        return MosesTokenizer(d["lang"], lowercase=bool(d.get("lowercase", False)))
    if kind == "sentencepiece":
        if not isinstance(d.get("model_file"), str):
            raise DataError(f"{source}: 'model_file' must name a sentencepiece model, got {d.get('model_file')!r}")
        model = Path(base_dir) / d["model_file"]
        if not model.resolve().is_relative_to(Path(base_dir).resolve()):
            raise DataError(f"{source}: model_file {d['model_file']!r} is outside {base_dir}")
        if not isinstance(d.get("lowercase", False), bool):
            raise DataError(f"{source}: 'lowercase' must be true or false, got {d['lowercase']!r:.60}")
        return SentencePieceTokenizer(model, lowercase=d.get("lowercase", False))
    raise DataError(f"{source}: unknown tokenizer type {kind!r}; expected 'moses' or 'sentencepiece'")


def train_sentencepiece(texts: Iterable[str], *, vocab_size: int, model_type: str = "bpe",
                        cache_dir: str | os.PathLike, character_coverage: float = 1.0) -> Path:
    """Train a sentencepiece model, or return the cached one trained on the same input.

    The model goes to `cache_dir/spm-<model_type>-<vocab_size>-<hash>.model`, where the hash
    is a sha256 of the texts and all settings. Training is quiet, uses 2 threads, and treats
    `vocab_size` as an upper bound (`hard_vocab_limit=False`) so a tiny corpus does not fail.
    Pass source and target texts together for a joint model, or one language for its own model.

    Args:
        texts: training sentences, one per item.
        vocab_size: the (maximum) number of pieces.
        model_type: "bpe" or "unigram".
        cache_dir: folder for cached models.
        character_coverage: fraction of characters covered by the model (1.0 for Latin scripts).

    Returns:
        Path to the `.model` file.

    Raises:
        DataError: no texts, a bad model type, or a vocabulary too small for the characters.
    """
    import sentencepiece as spm

    if model_type not in SENTENCEPIECE_MODEL_TYPES:
        raise DataError(f"sentencepiece model_type={model_type!r}; choose from {SENTENCEPIECE_MODEL_TYPES}")
    texts = [t for t in (text.strip() for text in texts) if t]
    if not texts:
        raise DataError("cannot train sentencepiece on an empty corpus")
    settings = {"vocab_size": vocab_size, "model_type": model_type,
                "character_coverage": character_coverage, "version": spm.__version__}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\n")
    cache_dir = Path(cache_dir)
    model_path = cache_dir / f"spm-{model_type}-{vocab_size}-{digest.hexdigest()[:16]}.model"
    if model_path.is_file():
        logger.debug("sentencepiece model cached at %s", model_path)
        return model_path

    cache_dir.mkdir(parents=True, exist_ok=True)
    logger.info("training a %s sentencepiece model (vocab_size=%d) on %d sentences",
                model_type, vocab_size, len(texts))
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".spm-") as tmp:
        prefix = Path(tmp) / "model"
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(texts), model_prefix=str(prefix), vocab_size=vocab_size,
                model_type=model_type, character_coverage=character_coverage,
                hard_vocab_limit=False, num_threads=2, minloglevel=2)
        except RuntimeError as err:
            raise DataError(f"sentencepiece training failed (vocab_size={vocab_size}): {err}") from None
        # .vocab first: a present .model is what marks the cache entry as complete.
        os.replace(prefix.with_suffix(".vocab"), model_path.with_suffix(".vocab"))
        os.replace(prefix.with_suffix(".model"), model_path)
    return model_path
