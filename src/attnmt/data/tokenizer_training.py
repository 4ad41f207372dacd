"""The tokenizers of a preparation: a given run's (train.init_from) as they are, Moses, or
sentencepiece models trained on a random sample of at most data.spm_train_sentences pairs
(reservoir sampling: one pass over the corpus, the sample's memory only).
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Iterator

from attnmt.data.cache import Plan
from attnmt.data.corpus import RawChunk, cache_dir
from attnmt.data.pipeline import TextPipeline
from attnmt.data.tokenizers import MosesTokenizer, SentencePieceTokenizer, train_sentencepiece
from attnmt.errors import DataError


def sample_pairs(chunks: Iterator[tuple[int, RawChunk]], size: int, seed: str) -> list[tuple[str, str]]:
    """A uniform random sample of `size` pairs of the stream (all of them when there are fewer),
    in stream order, pairs with an empty side left out. Reservoir sampling, algorithm L of Li
    (1994): the gaps between the pairs that enter are drawn, so only those pairs are decoded."""
    rng = random.Random(seed)

    def shrink(weight: float) -> float:  # weight *= u^(1/size), kept below 1 so that the gap is finite
        return min(weight * math.exp(math.log(1.0 - rng.random()) / size), math.nextafter(1.0, 0.0))

    def gap(weight: float) -> int:  # pairs passed over before the next one enters
        return int(math.log(1.0 - rng.random()) / math.log(1.0 - weight))

    reservoir: list[tuple[int, str, str]] = []  # (position in the stream, source, target)
    weight, following = shrink(1.0), None      # the next position to enter once the reservoir is full
    start = 0
    for _, chunk in chunks:
        end = start + len(chunk)
        position = start
        while len(reservoir) < size and position < end:
            reservoir.append((position, *chunk.pair(position - start)[1:]))
            position += 1
        if len(reservoir) == size:
            following = size + gap(weight) if following is None else following
            while following < end:
                reservoir[rng.randrange(size)] = (following, *chunk.pair(following - start)[1:])
                weight = shrink(weight)
                following += 1 + gap(weight)
        start = end
    reservoir.sort()
    return [(src, tgt) for _, src, tgt in reservoir if src and tgt]


def train_tokenizers(plan: Plan, folder: Path) -> tuple[dict, dict]:
    """The tokenizers' settings (`to_dict`), their sentencepiece models trained on a sample and
    copied into `folder`.

    Raises:
        DataError: no pair with two non-empty sides to train sentencepiece on.
    """
    s = plan.settings
    if plan.init_from:  # the given run's, as they are
        given = TextPipeline.load(Path(plan.init_from))
        return tuple((tok.copy_model_to(folder) if isinstance(tok, SentencePieceTokenizer) else tok).to_dict()
                     for tok in (given.src_tokenizer, given.tgt_tokenizer))
    if s["tokenizer"] == "moses":
        return (MosesTokenizer(s["src_lang"], lowercase=s["lowercase"]).to_dict(),
                MosesTokenizer(s["tgt_lang"], lowercase=s["lowercase"]).to_dict())
    per_model = s["spm_train_sentences"]
    pairs = sample_pairs(plan.chunks(), per_model // 2 if s["spm_joint"] else per_model,
                         seed=f"attnmt-spm-sample:{plan.key}")
    if not pairs:
        raise DataError(f"{plan.names()}: no pair with two non-empty sides to train sentencepiece on")
    options = dict(vocab_size=s["spm_vocab_size"], model_type=s["spm_model_type"], cache_dir=cache_dir() / "sentencepiece")
    lowercase = s.get("lowercase", False)
    if lowercase:  # the models learn lowercased text, which their tokenizers then give them
        pairs = [(src.lower(), tgt.lower()) for src, tgt in pairs]

    def trained_on(texts: list[str]) -> SentencePieceTokenizer:
        model = train_sentencepiece(texts, **options)
        return SentencePieceTokenizer(model, lowercase=lowercase).copy_model_to(folder)

    if s["spm_joint"]:
        src_tok = tgt_tok = trained_on([src for src, _ in pairs] + [tgt for _, tgt in pairs])
    else:
        src_tok, tgt_tok = trained_on([src for src, _ in pairs]), trained_on([tgt for _, tgt in pairs])
    return src_tok.to_dict(), tgt_tok.to_dict()
