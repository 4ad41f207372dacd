"""A vocabulary shortlist for CTranslate2 (`vmap.txt`, `use_vmap=True`): for each source token
the target tokens a translation of it may use, so that the output layer and the softmax run over
the union of the batch's candidates instead of the whole target vocabulary.

Shapes: none; token ids in, text lines out.

The file is CTranslate2's vocabulary mapping (include/ctranslate2/vocabulary_map.h): one line per
source token, ``source<TAB>target target ...``; the line whose source is empty lists the tokens
that are always allowed (CTranslate2 adds <unk>, <bos>, <eos> and a target prefix's tokens itself).

Built from the run's prepared training data by sentence-level co-occurrence, as Marian's lexical
shortlists are (Junczys-Dowmunt et al. 2018: the `frequent` most frequent target tokens, plus the
`top_k` best translations of each source token): a target token is a candidate for a source
token when they occur in the same training pair, ranked by the Dice coefficient
2 c(s, t) / (c(s) + c(t)) over sentence counts (raw counts would fill every list with the
frequent tokens that the empty line already allows). Co-occurrence rather than attnmt's word
alignments (decoding/alignment.py): alignments need a forced decoding of the whole corpus with a
model, and a Transformer's attention aligns poorly; the shortlist wants recall, which a generous
top-k of co-occurring tokens gives in one pass over token ids.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from attnmt.data.cooccurrence import Cooccurrence, count_cooccurrence
from attnmt.data.prepared import PreparedData
from attnmt.data.vocab import Vocab
from attnmt.errors import AttnmtError
from attnmt.files import atomic_write_text, read_json
from attnmt.run_dir import PREPARED, RunDir

log = logging.getLogger(__name__)

VMAP_FILE = "vmap.txt"  # the name CTranslate2 reads in a model folder


@dataclass(frozen=True)
class VocabMapSettings:
    """How large the shortlist is.

    Attributes:
        top_k: target tokens listed per source token (its best by Dice).
        frequent: the most frequent target tokens of the training data, always allowed.
    """

    top_k: int = 50
    frequent: int = 100

    def __post_init__(self):
        if self.top_k < 1 or self.frequent < 0:
            raise ValueError(f"vocabulary map: top_k={self.top_k} must be >= 1 and frequent={self.frequent} >= 0")


def _usable(token: str) -> bool:
    """A token the file can hold: no whitespace (a space would make an n-gram, a tab a column)."""
    return bool(token) and not any(c.isspace() for c in token)


def vocab_map_lines(counts: Cooccurrence, src_vocab: Vocab, tgt_vocab: Vocab, settings: VocabMapSettings) -> list[str]:
    """The lines of vmap.txt (without newlines): first the empty source with the `frequent` most
    frequent target tokens, then each source token (vocabulary order) with its `top_k` targets by
    Dice, best first (ties: more co-occurrences, then the lower id). Specials, suppressed tokens
    and tokens with whitespace are left out."""
    tgt_specials = _special_ids(tgt_vocab) | set(tgt_vocab.suppressed_ids)  # search never writes these
    src_specials = _special_ids(src_vocab)
    tgt_words = [i for i, token in enumerate(tgt_vocab.itos) if i not in tgt_specials and _usable(token)]
    order = sorted((i for i in tgt_words if counts.tgt_tokens[i] > 0), key=lambda i: (-counts.tgt_tokens[i], i))
    lines = ["\t" + " ".join(tgt_vocab.itos[i] for i in order[:settings.frequent])]
    usable_tgt = np.zeros(len(tgt_vocab), bool)
    usable_tgt[tgt_words] = True
    keep = usable_tgt[counts.tgt]
    src, tgt, both = counts.src[keep], counts.tgt[keep], counts.both[keep]
    dice = counts.dice()[keep]
    order = np.lexsort((tgt, -both, -dice, src))  # by source, then best first
    src, tgt = src[order], tgt[order]
    starts = np.flatnonzero(np.r_[True, src[1:] != src[:-1]]) if len(src) else np.zeros(0, np.int64)
    ends = np.r_[starts[1:], len(src)]
    for start, end in zip(starts.tolist(), ends.tolist()):
        source = int(src[start])
        token = src_vocab.itos[source]
        if source in src_specials or not _usable(token):
            continue
        targets = tgt[start:min(end, start + settings.top_k)]
        lines.append(token + "\t" + " ".join(tgt_vocab.itos[int(t)] for t in targets))
    return lines


def _special_ids(vocab: Vocab) -> set[int]:
    return {vocab.pad_id, vocab.unk_id, vocab.bos_id, vocab.eos_id}


def full_vocab_map_lines(tgt_vocab: Vocab) -> list[str]:
    """A map that allows every target token (the output must then equal the output without one)."""
    return ["\t" + " ".join(token for token in tgt_vocab.itos if _usable(token))]


def write_vocab_map(path: str | Path, lines: list[str]) -> None:
    atomic_write_text(path, "".join(line + "\n" for line in lines))


def prepared_pairs(data: PreparedData) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every prepared pair's (source ids, target ids), part by part."""
    for part in data.parts:
        arrays = part.arrays
        src_offsets, tgt_offsets = arrays["src.offsets"], arrays["tgt.offsets"]
        src_ids, tgt_ids = arrays["src.ids"], arrays["tgt.ids"]
        for row in range(len(part)):
            yield (src_ids[src_offsets[row]:src_offsets[row + 1]], tgt_ids[tgt_offsets[row]:tgt_offsets[row + 1]])


def run_training_data(run: RunDir) -> PreparedData:
    """The prepared data a run was trained on (its prepared.json), checked.

    Raises:
        AttnmtError: the run names none (an imported model) or it is no longer in the cache.
    """
    path = run.path / PREPARED
    if not path.is_file():
        raise AttnmtError(f"{run.path}: no {PREPARED}, so no training data to build a vocabulary map from "
                          f"(an imported model): export without --vocab-map")
    info = read_json(run.verified(PREPARED), AttnmtError)
    folder = Path(info.get("folder", "")) if isinstance(info, dict) else Path("")
    if not (folder / "manifest.json").is_file():
        raise AttnmtError(f"{path}: its prepared training data {folder} is not in the cache any more: prepare it "
                          f"again with `attnmt prepare {run.path / 'config.json'}`, then export")
    return PreparedData.open(folder)


def build_vocab_map(run: RunDir, settings: VocabMapSettings) -> list[str]:
    """vmap.txt's lines for `run`, from its prepared training data."""
    data = run_training_data(run)
    pipeline = run.pipeline()
    log.info("vocabulary map: counting co-occurrences over %d training pairs of %s", len(data), data.folder)
    counts = count_cooccurrence(prepared_pairs(data), len(pipeline.src_vocab), len(pipeline.tgt_vocab))
    lines = vocab_map_lines(counts, pipeline.src_vocab, pipeline.tgt_vocab, settings)
    log.info("vocabulary map: %d source tokens, top %d each, %d always allowed", len(lines) - 1, settings.top_k,
             len(lines[0].split()))
    return lines
