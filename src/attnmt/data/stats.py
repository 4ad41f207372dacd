"""Corpus statistics (`attnmt data stats`): per split and language, sentences, tokens, vocabulary, OOV and lengths.

    attnmt data stats --corpus multi30k --src-lang de --tgt-lang en --tokenizer moses
    attnmt data stats --corpus data/train --valid data/dev      # own files, given as in a config
    attnmt data stats --config multi30k_transformer             # the data section of a config

The training split is the prepared data that training reads (data.prepare: prepared now, or
found in the cache), so its rows describe the pairs training sees, after the filters, with the
same tokenizers and vocabularies; the filters' counts are printed below the table. The other
splits go through that pipeline. The OOV rate of every split is the share of its tokens that
the train vocabulary maps to <unk>.

`--corpus` is "multi30k", or own data given the way `data.train` gives it: a path prefix `P`
(`P.<src_lang>[.gz]` and `P.<tgt_lang>[.gz]`) or a `.tsv` file; `--valid` and `--test` likewise.
When they are not given, they are looked for next to the train files: a prefix ending in `train`
(`data/train`) has `data/val` (or `valid`, `dev`) and `data/test`; a folder `D` means `D/train`.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from attnmt.config import DataConfig
from attnmt.data.corpus import CorpusSpec, corpus_spec, load_corpus
from attnmt.data.prepare import prepare
from attnmt.data.prepared import SIDES, PreparedData
from attnmt.data.tokenizers import Tokenizer
from attnmt.data.vocab import Vocab
from attnmt.errors import DataError

logger = logging.getLogger(__name__)

DEFAULT_SPLITS = ("train", "val", "test")
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class SideStats:
    """Statistics of one side (language) of one split."""

    split: str
    lang: str
    sentences: int
    tokens: int
    types: int
    vocab_size: int
    oov_rate: float
    percentiles: tuple[int, ...]
    max_len: int


def percentile(sorted_values: Sequence[int], p: float) -> int:
    """Nearest-rank percentile of an ascending list or array (0 when empty)."""
    if len(sorted_values) == 0:
        return 0
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return int(sorted_values[rank - 1])


def side_stats(split: str, lang: str, token_lists: list[list[str]], vocab: Vocab) -> SideStats:
    """Counts, OOV rate against `vocab`, and length percentiles of tokenized sentences."""
    lengths = sorted(len(tokens) for tokens in token_lists)
    total = sum(lengths)
    types = {token for tokens in token_lists for token in tokens}
    oov = sum(1 for tokens in token_lists for token in tokens if token not in vocab)
    return SideStats(split=split, lang=lang, sentences=len(token_lists), tokens=total, types=len(types),
                     vocab_size=len(vocab), oov_rate=oov / total if total else 0.0,
                     percentiles=tuple(percentile(lengths, p) for p in PERCENTILES),
                     max_len=lengths[-1] if lengths else 0)


def format_table(rows: list[SideStats]) -> str:
    """A plain-text table, one row per split and language."""
    header = ["split", "lang", "sentences", "tokens", "types", "vocab", "OOV%",
              *(f"p{p}" for p in PERCENTILES), "max"]
    cells = [header] + [[r.split, r.lang, f"{r.sentences:,}", f"{r.tokens:,}", f"{r.types:,}",
                         f"{r.vocab_size:,}", f"{100 * r.oov_rate:.2f}", *map(str, r.percentiles),
                         str(r.max_len)] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _exists(prefix: str, lang: str) -> bool:
    """Whether `prefix` names own data as `data.train` does: a .tsv file or `<prefix>.<lang>[.gz]`."""
    if prefix.endswith((".tsv", ".tsv.gz")):
        return Path(prefix).is_file()
    return any(Path(f"{prefix}.{lang}{gz}").is_file() for gz in ("", ".gz"))


def own_data_spec(train: str, src_lang: str, tgt_lang: str, *, valid: str | None = None,
                  test: str | None = None) -> CorpusSpec:
    """CorpusSpec of own data named as in a config: `train` is a path prefix or a .tsv file.

    A folder `D` stands for the prefix `D/train` (or `D/train.tsv`). Without `valid`/`test`, a train prefix (or
    .tsv file) named `train` finds its neighbours `val`, `valid` or `dev`, and `test`.

    Raises:
        DataError: no train files there; the message names what was looked for.
    """
    if Path(train).is_dir():
        candidates = [os.path.join(train, "train" + ext) for ext in ("", ".tsv", ".tsv.gz")]
        train = next((c for c in candidates if _exists(c, src_lang)), candidates[0])
    if not _exists(train, src_lang):
        raise DataError(f"--corpus {train}: found neither {train}.{src_lang}[.gz] nor a .tsv file; give "
                        "'multi30k', a path prefix as in data.train (data/train for data/train.de), a folder "
                        "holding train.<lang> files, or a .tsv file")
    folder, name = os.path.split(train)
    stem = next(name[: len(name) - len(ext)] for ext in (".tsv.gz", ".tsv", "") if name.endswith(ext))

    def neighbour(*names: str) -> str | None:
        """The first of `names` next to train (text files or .tsv), when train is named `...train`."""
        if not stem.endswith("train"):
            return None
        for other in names:
            for ext in ("", ".tsv", ".tsv.gz"):
                candidate = os.path.join(folder, stem[: -len("train")] + other + ext)
                if _exists(candidate, src_lang):
                    return candidate
        return None

    return CorpusSpec(name="files", src_lang=src_lang, tgt_lang=tgt_lang, train=train,
                      valid=valid or neighbour("val", "valid", "dev"), test=test or neighbour("test"))


@dataclass(frozen=True)
class CorpusStats:
    """The table's rows, and what preparing the training data read, kept and dropped (the manifest's counts)."""

    rows: list[SideStats]
    counts: dict
    inputs: list[dict]


def compute_stats(data_cfg: DataConfig, splits: Sequence[str] | None = None) -> CorpusStats:
    """Statistics for `splits` (default: train, val, test where they exist), both languages: the
    training split as prepared for training, the others tokenized by its pipeline."""
    spec = corpus_spec(data_cfg)
    if data_cfg.corpus == "multi30k":
        splits = list(splits or DEFAULT_SPLITS)
    else:
        present = [s for s, files in zip(DEFAULT_SPLITS, (spec.train, spec.valid, spec.test)) if files]
        splits = list(splits or present)
    start = time.perf_counter()
    directions = data_cfg.directions() if data_cfg.multilingual else [None]  # a multilingual config: each direction's sets
    others = {(split, direction): load_corpus(spec, split, direction)  # before preparing: a missing split
              for split in splits if split != "train" for direction in directions}  # fails fast
    prepared = prepare(data_cfg)
    pipeline = prepared.pipeline
    tokenizers = (pipeline.src_tokenizer, pipeline.tgt_tokenizer)
    vocabs = (pipeline.src_vocab, pipeline.tgt_vocab)
    rows = []
    for split in splits:
        if split == "train":  # a multilingual model's: all its sources, all its targets
            langs = ("src", "tgt") if data_cfg.multilingual else (data_cfg.src_lang, data_cfg.tgt_lang)
            rows += [prepared_side_stats(prepared, side, lang) for side, lang in zip(SIDES, langs)]
            continue
        for direction in directions:
            corpus = others[split, direction]
            name = split if direction is None else f"{split}:{direction}"
            for lang, texts, tokenizer, vocab in zip(direction or (data_cfg.src_lang, data_cfg.tgt_lang), (corpus.src, corpus.tgt),
                                                     tokenizers, vocabs):
                rows.append(side_stats(name, lang, _tokenize(tokenizer, texts), vocab))
    logger.debug("statistics computed in %.1f s", time.perf_counter() - start)
    return CorpusStats(rows, prepared.manifest["counts"], prepared.manifest["inputs"])


def prepared_side_stats(prepared: PreparedData, side: str, lang: str) -> SideStats:
    """The train row of one side, from the prepared arrays and the manifest's counts."""
    counts = prepared.manifest["sides"][side]
    vocab = prepared.pipeline.src_vocab if side == "src" else prepared.pipeline.tgt_vocab
    lengths = np.sort(prepared.src_lengths if side == "src" else prepared.tgt_lengths)
    tokens = int(counts["tokens"])
    return SideStats(split="train", lang=lang, sentences=len(prepared), tokens=tokens, types=int(counts["types"]),
                     vocab_size=len(vocab), oov_rate=counts["unk"] / tokens if tokens else 0.0,
                     percentiles=tuple(percentile(lengths, p) for p in PERCENTILES),
                     max_len=int(lengths[-1]) if len(lengths) else 0)


def format_counts(stats: CorpusStats) -> str:
    """What preparing the training data read, kept and dropped (by filter), per corpus when there are several."""
    counts = stats.counts
    dropped = ", ".join(f"{name.replace('_', ' ')} {n:,}" for name, n in counts["dropped"].items()) or "none"
    lines = [f"train: {counts['read']:,} pairs read, {counts['kept']:,} kept; dropped: {dropped}"]
    if len(stats.inputs) > 1:
        lines += [f"  {' + '.join(i['files'])}: {i['pairs']:,} kept" for i in stats.inputs]
    return "\n".join(lines)


def _tokenize(tokenizer: Tokenizer, texts: list[str]) -> list[list[str]]:
    return [tokenizer.tokenize(t) for t in texts]
