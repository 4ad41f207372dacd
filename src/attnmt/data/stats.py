"""`attnmt data stats`: per split and language, sentences, tokens, vocabulary, OOV and lengths.

    attnmt data stats --corpus multi30k --src-lang de --tgt-lang en --tokenizer moses

The vocabulary is built on the train split (`--min-freq`); the OOV rate of every split is the
share of its tokens that the train vocabulary maps to <unk>. With `--tokenizer sentencepiece`, one
joint model of `--vocab-size` pieces is trained on both sides of train (cached in the user cache).
`--corpus` is "multi30k", or own data: a folder or prefix `P` holding `P<split>.<lang>[.gz]` or
`P<split>.tsv` files (`data/` -> `data/train.de`, `data/m30k.` -> `data/m30k.train.de`).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from attnmt.data.corpus import CorpusSpec, ParallelCorpus, cache_dir, load_corpus
from attnmt.data.tokenizers import MosesTokenizer, SentencePieceTokenizer, Tokenizer, train_sentencepiece
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


def percentile(sorted_values: list[int], p: float) -> int:
    """Nearest-rank percentile of an ascending list (0 for an empty list)."""
    if not sorted_values:
        return 0
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


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


def own_data_spec(corpus: str, src_lang: str, tgt_lang: str) -> CorpusSpec:
    """CorpusSpec for own data under a folder or prefix: `<prefix><split>` text files or TSV.

    The validation split is the first of `val`, `valid`, `dev` that exists; a single TSV file
    is the train split.
    """
    if corpus.endswith((".tsv", ".tsv.gz")):
        return CorpusSpec(name=corpus, src_lang=src_lang, tgt_lang=tgt_lang, train=corpus)
    prefix = corpus + os.sep if Path(corpus).is_dir() and not corpus.endswith(("/", os.sep)) else corpus

    def find(split: str) -> str | None:
        """The TSV file, or the prefix of the text files, of `split`; None if neither exists."""
        for tsv in (f"{prefix}{split}.tsv", f"{prefix}{split}.tsv.gz"):
            if Path(tsv).is_file():
                return tsv
        texts = (f"{prefix}{split}.{src_lang}", f"{prefix}{split}.{src_lang}.gz")
        return f"{prefix}{split}" if any(Path(t).is_file() for t in texts) else None

    train = find("train")
    if train is None:
        raise DataError(f"--corpus {corpus}: found neither {prefix}train.{src_lang}[.gz] nor {prefix}train.tsv; "
                        "give 'multi30k', a folder, a path prefix or a .tsv file")
    valid = next(filter(None, map(find, ("val", "valid", "dev"))), None)
    return CorpusSpec(name=corpus, src_lang=src_lang, tgt_lang=tgt_lang, train=train, valid=valid,
                      test=find("test"))


def _build_tokenizers(args: argparse.Namespace, train: ParallelCorpus) -> tuple[Tokenizer, Tokenizer]:
    if args.tokenizer == "moses":
        return (MosesTokenizer(args.src_lang, lowercase=args.lowercase),
                MosesTokenizer(args.tgt_lang, lowercase=args.lowercase))
    texts = train.src + train.tgt
    if args.lowercase:
        texts = [t.lower() for t in texts]
    model = train_sentencepiece(texts, vocab_size=args.vocab_size, model_type="bpe",
                                cache_dir=cache_dir() / "sentencepiece")
    tokenizer = SentencePieceTokenizer(model)
    return tokenizer, tokenizer


def _tokenize(tokenizer: Tokenizer, texts: list[str], lowercase: bool) -> list[list[str]]:
    if lowercase and isinstance(tokenizer, SentencePieceTokenizer):
        texts = [t.lower() for t in texts]
    return [tokenizer.tokenize(t) for t in texts]


def compute_stats(args: argparse.Namespace) -> list[SideStats]:
    """Statistics for every requested split, both languages; the vocabulary comes from train."""
    if args.corpus == "multi30k":
        spec = CorpusSpec(name="multi30k", src_lang=args.src_lang, tgt_lang=args.tgt_lang)
        splits = list(args.splits or DEFAULT_SPLITS)
    else:
        spec = own_data_spec(args.corpus, args.src_lang, args.tgt_lang)
        present = [s for s, files in zip(DEFAULT_SPLITS, (spec.train, spec.valid, spec.test)) if files]
        splits = list(args.splits or present)
    start = time.perf_counter()
    train = load_corpus(spec, "train")
    src_tok, tgt_tok = _build_tokenizers(args, train)
    train_tokens = (_tokenize(src_tok, train.src, args.lowercase), _tokenize(tgt_tok, train.tgt, args.lowercase))
    vocabs = [Vocab.build(tokens, min_freq=args.min_freq) for tokens in train_tokens]
    rows = []
    for split in splits:
        if split == "train":
            tokens = train_tokens
        else:
            corpus = load_corpus(spec, split)
            tokens = (_tokenize(src_tok, corpus.src, args.lowercase), _tokenize(tgt_tok, corpus.tgt, args.lowercase))
        for lang, side, vocab in zip((args.src_lang, args.tgt_lang), tokens, vocabs):
            rows.append(side_stats(split, lang, side, vocab))
    logger.debug("statistics computed in %.1f s", time.perf_counter() - start)
    return rows


def stats_command(args: argparse.Namespace) -> int:
    """Print the statistics table of `attnmt data stats`; returns the exit code."""
    if args.min_freq < 1:
        raise DataError(f"--min-freq={args.min_freq} must be >= 1")
    rows = compute_stats(args)
    tokenizer = args.tokenizer + (f" ({args.vocab_size} pieces, joint)" if args.tokenizer == "sentencepiece" else "")
    print(f"corpus {args.corpus} {args.src_lang}->{args.tgt_lang}, tokenizer {tokenizer}"
          f"{', lowercased' if args.lowercase else ''}; vocab built on train with min_freq={args.min_freq}")
    print(format_table(rows))
    return 0
