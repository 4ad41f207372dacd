"""A part's temporary files, between the workers' EncodedChunks and the prepared arrays.

Each rank stages its chunks in its part's folder (`StagingWriter`: token ids in the tokenizer's
numbering, Moses tokens numbered part-wide); then, over all parts, the duplicates are marked
(`dedup`), the tokens counted (`count_tokens`) and the vocabularies built with each part's map
from its ids to theirs (`build_vocabularies`); last, each rank writes its part's arrays with
`prepared.PartWriter` and the temporary files go (`finish_part`).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from attnmt.data.cache import Plan
from attnmt.data.encode import EncodedChunk
from attnmt.data.pipeline import TextPipeline
from attnmt.data.prepared import SIDES, PartWriter, blocks, part_name
from attnmt.data.tokenizers import Tokenizer, tokenizer_from_dict
from attnmt.data.vocab import Vocab
from attnmt.files import atomic_write_text

# the files StagingWriter appends to, and their types
STAGED = {"src.tok": np.uint32, "src.len": np.uint32, "tgt.tok": np.uint32, "tgt.len": np.uint32,
          "lines.tmp": np.uint64, "corpus.tmp": np.uint8, "digests.tmp": np.uint64}
KEEP = "keep.npy"  # (pairs,) bool: not a duplicate (data.dedup)
# the files of the later steps, per side: token counts, the map to the vocabulary, Moses tokens
COUNTS, REMAP, TYPES = "counts.{}.npy", "remap.{}.npy", "types.{}.json"


class StagingWriter:
    """Appends EncodedChunks to a part's temporary files, giving Moses tokens part-wide ids."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.handles = {name: open(folder / name, "wb") for name in STAGED}
        self.types: dict[str, dict[str, int]] = {"src": {}, "tgt": {}}
        self.read = self.pairs = 0
        self.dropped: Counter = Counter()

    def add(self, chunk: EncodedChunk) -> None:
        for side in SIDES:
            ids, types = getattr(chunk, f"{side}_ids"), getattr(chunk, f"{side}_types")
            if types is not None:  # Moses: the chunk's own numbering -> the part's
                space = self.types[side]
                ids = np.fromiter((space.setdefault(t, len(space)) for t in types), dtype=np.uint32,
                                  count=len(types))[ids] if len(ids) else ids
            ids.astype(np.uint32, copy=False).tofile(self.handles[f"{side}.tok"])
            getattr(chunk, f"{side}_lens").astype(np.uint32, copy=False).tofile(self.handles[f"{side}.len"])
        chunk.lines.astype(np.uint64, copy=False).tofile(self.handles["lines.tmp"])
        np.full(len(chunk.lines), chunk.corpus, dtype=np.uint8).tofile(self.handles["corpus.tmp"])
        if chunk.digests is not None:
            chunk.digests.tofile(self.handles["digests.tmp"])
        self.read += chunk.read
        self.pairs += len(chunk.lines)
        self.dropped.update(chunk.dropped)

    def close(self) -> dict:
        """The part's summary: pairs read, pairs kept, filter -> pairs dropped."""
        for handle in self.handles.values():
            handle.close()
        for side in SIDES:
            if self.types[side]:
                atomic_write_text(self.folder / TYPES.format(side), json.dumps(list(self.types[side]), ensure_ascii=False))
        return {"read": self.read, "pairs": self.pairs, "dropped": dict(self.dropped)}


def dedup(parts: list[Path], summaries: list[dict]) -> None:
    """Keep the first pair of each digest, first in (corpus, line) order whatever the parts;
    writes each part's keep.npy and counts the duplicates in `summaries`."""
    digests = np.concatenate([np.fromfile(p / "digests.tmp", dtype=np.uint64) for p in parts])
    corpus = np.concatenate([np.fromfile(p / "corpus.tmp", dtype=np.uint8) for p in parts])
    lines = np.concatenate([np.fromfile(p / "lines.tmp", dtype=np.uint64) for p in parts])
    order = np.lexsort((lines, corpus, digests))  # by digest, then where the pair stands in the input
    first = np.ones(len(order), dtype=bool)
    first[1:] = digests[order[1:]] != digests[order[:-1]]
    keep = np.empty(len(order), dtype=bool)
    keep[order] = first
    del digests, corpus, lines, order
    start = 0
    for folder, summary in zip(parts, summaries):
        mine = keep[start:start + summary["pairs"]]
        np.save(folder / KEEP, mine)
        start += summary["pairs"]
        duplicates = int(summary["pairs"] - mine.sum())
        summary["pairs"] -= duplicates
        if duplicates:
            summary["dropped"]["duplicate"] = duplicates


def _keep(folder: Path) -> np.ndarray | None:
    path = folder / KEEP
    return np.load(path) if path.is_file() else None


def _token_blocks(lens: np.ndarray, keep: np.ndarray | None) -> Iterator[tuple[slice, slice, np.ndarray | None]]:
    """(pairs, their tokens, the kept tokens' mask or None) in blocks of pairs."""
    token = 0
    for pairs in blocks(len(lens)):
        n = int(lens[pairs].sum())
        mask = None if keep is None else np.repeat(keep[pairs], lens[pairs])
        yield pairs, slice(token, token + n), mask
        token += n


def count_tokens(part: Path, tokenizers: tuple[dict, dict]) -> None:
    """Count each token id of the kept pairs, per side: counts.SIDE.npy."""
    keep = _keep(part)
    for side, settings in zip(SIDES, tokenizers):
        ids = np.memmap(part / f"{side}.tok", dtype=np.uint32, mode="r") if (part / f"{side}.tok").stat().st_size \
            else np.zeros(0, dtype=np.uint32)
        lens = np.fromfile(part / f"{side}.len", dtype=np.uint32)
        size = len(_types(part, side, settings))
        counts = np.zeros(size, dtype=np.int64)
        for _, tokens, mask in _token_blocks(lens, keep):
            chunk = ids[tokens] if mask is None else ids[tokens][mask]
            counts += np.bincount(chunk, minlength=size)[:size]
        np.save(part / COUNTS.format(side), counts)


def _types(part: Path, side: str, settings: dict) -> list[str]:
    """The part's token strings by id: sentencepiece's pieces, or the Moses tokens of types.SIDE.json."""
    if settings["type"] == "sentencepiece":
        return _tokenizer(settings, part.parent).pieces()
    path = part / TYPES.format(side)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []


def _tokenizer(settings: dict, folder: Path) -> Tokenizer:
    return tokenizer_from_dict(settings, folder, source="prepared tokenizer")


def build_vocabularies(plan: Plan, tokenizers: tuple[dict, dict], folder: Path, ranks: int) -> dict:
    """The vocabularies from every part's counts (joint for a joint sentencepiece model), the
    pipeline saved in `folder`, each part's remap.SIDE.npy (its ids -> vocabulary ids); returns
    the distinct tokens seen on each side."""
    s = plan.settings
    parts = [folder / part_name(r) for r in range(ranks)]
    joint = s["tokenizer"] == "sentencepiece" and s["spm_joint"]
    totals: dict[str, Counter] = {side: Counter() for side in SIDES}
    for part in parts:
        for side, settings in zip(SIDES, tokenizers):
            counts = np.load(part / COUNTS.format(side))
            types = _types(part, side, settings)
            for i in np.flatnonzero(counts).tolist():
                totals[side][types[i]] += int(counts[i])
    seen = {side: {"types": len(totals[side])} for side in SIDES}
    if joint:  # one vocabulary over both sides' counts
        totals = {"src": totals["src"] + totals["tgt"], "tgt": Counter()}
    languages, source_eos = plan.languages(), False
    if plan.init_from:  # the given run's vocabularies: its tokens keep their ids, the rest is <unk>
        given = TextPipeline.load(Path(plan.init_from))
        src_vocab, tgt_vocab, languages, source_eos = given.src_vocab, given.tgt_vocab, given.languages, given.source_eos
    else:
        options = dict(min_freq=s["min_freq"], max_size=s["max_vocab"],
                       reserved=languages.tokens() if languages else ())
        src_vocab = Vocab.from_counts(totals["src"], **options)
        tgt_vocab = src_vocab if joint else Vocab.from_counts(totals["tgt"], **options)
    TextPipeline(_tokenizer(tokenizers[0], folder), _tokenizer(tokenizers[1], folder), src_vocab, tgt_vocab,
                 languages, source_eos).save(folder)
    for part in parts:
        for side, settings, vocab in zip(SIDES, tokenizers, (src_vocab, tgt_vocab)):
            types = _types(part, side, settings)
            remap = np.fromiter((vocab.stoi.get(t, vocab.unk_id) for t in types), dtype=np.uint32, count=len(types))
            np.save(part / REMAP.format(side), remap)
    return seen


def finish_part(part: Path, folder: Path) -> dict:
    """The part's arrays (prepared.PartWriter) from its temporary files, which are removed;
    returns their manifest entries and the part's counts."""
    pipeline = TextPipeline.load(folder)
    keep = _keep(part)
    lines = np.fromfile(part / "lines.tmp", dtype=np.uint64)
    corpus = np.fromfile(part / "corpus.tmp", dtype=np.uint8)
    if keep is not None:
        lines, corpus = lines[keep], corpus[keep]
    info: dict[str, Any] = {"pairs": len(lines), "sides": {}, "per_corpus": np.bincount(corpus, minlength=1).tolist()}
    writer = PartWriter(part)
    writer.pairs(lines, corpus)
    del lines, corpus
    for side, vocab in zip(SIDES, (pipeline.src_vocab, pipeline.tgt_vocab)):
        lens = np.fromfile(part / f"{side}.len", dtype=np.uint32)
        unknown = [0]
        tokens = writer.side(side, lens if keep is None else lens[keep], len(vocab),
                             _renumbered(part, side, lens, keep, vocab.unk_id, unknown))
        info["sides"][side] = {"tokens": tokens, "unk": unknown[0]}
    for temp in [*STAGED, KEEP, *(name.format(side) for name in (COUNTS, REMAP, TYPES) for side in SIDES)]:
        (part / temp).unlink(missing_ok=True)
    info["files"] = writer.files()
    return info


def _renumbered(part: Path, side: str, lens: np.ndarray, keep: np.ndarray | None, unk_id: int,
                unknown: list[int]) -> Iterator[np.ndarray]:
    """The kept pairs' ids of `side` in the vocabulary's numbering, in blocks; adds the <unk>s to unknown[0]."""
    remap = np.load(part / REMAP.format(side))
    raw = np.memmap(part / f"{side}.tok", dtype=np.uint32, mode="r") if len(lens) and lens.sum() \
        else np.zeros(0, dtype=np.uint32)
    for _, tokens, mask in _token_blocks(lens, keep):
        ids = remap[raw[tokens] if mask is None else raw[tokens][mask]]
        unknown[0] += int(np.count_nonzero(ids == unk_id))
        yield ids
