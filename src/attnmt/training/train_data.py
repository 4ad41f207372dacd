"""The training data of a run: the prepared corpus (data.prepare: found in the cache, or prepared
now), the text pipeline saved with the run, the validation batches, and each epoch's updates.

Shapes:
    batch    sentences in a batch
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from attnmt.config import Config, save_config
from attnmt.data.augment import Augmenter, TextSide
from attnmt.data.fragments import SAMPLE as FRAGMENT_SAMPLE, Fragments
from attnmt.data.lexicon import Lexicon, Lexicons
from attnmt.data.batching import Batch, make_batches
from attnmt.data.corpus import ParallelCorpus, corpus_spec, load_corpus
from attnmt.data.epochs import Batching, Epoch
from attnmt.data.languages import temperature_weights
from attnmt.data.pipeline import TextPipeline, pipeline_difference
from attnmt.data.cache import make_plan, open_key, prepared_root, what_changed
from attnmt.data.prepare import prepare
from attnmt.data.prepared import PreparedData
from attnmt.direction import Direction
from attnmt.errors import AttnmtError, DataError
from attnmt.files import read_json, write_json
from attnmt.run_dir import CONFIG, PREPARED, RunDir
from attnmt.world import SINGLE, World, barrier, broadcast_from_main
from attnmt.training.init_from import init_pipeline

log = logging.getLogger(__name__)


@dataclass
class ValSet:
    """The validation pairs of one direction (a one-direction run has one)."""

    direction: Direction
    corpus: ParallelCorpus
    batches: list[Batch]
    n_bleu: int                  # its first n_bleu sentences are translated for BLEU / chrF
    target_lang: str | None      # the language token to give the model (a multilingual run's)


@dataclass
class TrainData:
    prepared: PreparedData
    pipeline: TextPipeline
    weights: list[float]        # per corpus of the prepared data: examples per epoch = weight x pairs
    batching: Batching
    val: list[ValSet]
    prefixes: list[tuple[list[int], list[int]]] | None = None  # per corpus: its language token ids
    augment: Augmenter | None = None  # data.augment's noise, on the fly (None: none)

    def epoch(self, epoch: int) -> Epoch:
        """Epoch `epoch`'s batches and updates (the same on every rank)."""
        return Epoch(self.prepared, self.weights, self.batching, epoch, self.prefixes, self.augment)


LEXICON_SAMPLE = 500_000  # source sentences the lexicon is counted on
CASE_SAMPLE = 500  # training examples a case modifier's share of applicable edits is checked on


def prepared_examples(prepared: PreparedData, *, corpus: int | None = None, limit: int | None = None,
                      block: int = 4096) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The prepared pairs' ids in order, read a block at a time: every pair, or those of corpus
    number `corpus` (its manifest input); the first `limit` of them (None: all)."""
    if corpus is None:
        end = len(prepared) if limit is None else min(limit, len(prepared))
        chunks = (np.arange(start, min(start + block, end)) for start in range(0, end, block))
    else:
        index = np.flatnonzero(prepared.corpus_of == corpus)[:limit]
        chunks = (index[start:start + block] for start in range(0, len(index), block))
    for chunk in chunks:
        yield from zip(prepared.ids("src", chunk), prepared.ids("tgt", chunk))


def source_lexicon(prepared: PreparedData, *, limit: int = LEXICON_SAMPLE, fragments: Fragments | None = None
                   ) -> Lexicon | Lexicons:
    """The source words of the first `limit` prepared pairs (data/lexicon.py) and, of a bilingual
    run, its short phrases' translations (data/phrases.py: cut as `fragments` cuts, by default a
    table of these pairs); of a multilingual run, per source language the first `limit` pairs of
    the first corpus that reads it (a multiway corpus holds the same sentences in each of its
    directions: counted once), and per direction the phrases of the first corpus of it, each
    counted with word links of its own pairs (Lexicon.phrases_to)."""
    side = TextSide(prepared.pipeline, "src")
    inputs = prepared.manifest["inputs"]
    if prepared.pipeline.languages is None or not all("pair" in entry for entry in inputs):
        texts = (side.text(src) for src, _ in prepared_examples(prepared, limit=limit))
        lexicon = Lexicon.from_sentences(text.split() for text in texts if text is not None)
        if prepared.pipeline.languages is None:
            fragments = fragments or Fragments.for_pipeline(prepared_examples(prepared), prepared.pipeline)
            lexicon.phrases = fragments.phrases_of(prepared_examples(prepared))
        return lexicon
    directions = {}  # direction -> its first corpus
    for corpus, entry in enumerate(inputs):
        directions.setdefault(Direction.parse(entry["pair"], "manifest: inputs", error=DataError), corpus)
    target_side = TextSide(prepared.pipeline, "tgt")
    lexicons: dict[str, Lexicon] = {}
    for direction, corpus in directions.items():  # each direction's pairs read (decoded) once, as far as needed:
        new_source = direction.source not in lexicons  # its sources for a lexicon, the first ones for the links
        sources, pairs = [], []
        for n, (src, tgt) in enumerate(prepared_examples(prepared, corpus=corpus,
                                                         limit=limit if new_source else min(limit, FRAGMENT_SAMPLE))):
            text = side.text(src)
            sources.append(text)
            target = target_side.text(tgt) if text is not None and n < FRAGMENT_SAMPLE else None
            if target is not None:
                pairs.append((text.split(), target.split()))
        if new_source:
            lexicons[direction.source] = Lexicon.from_sentences(text.split() for text in sources if text is not None)
        lexicons[direction.source].phrases_to[direction.target] = Fragments.from_pairs(pairs).phrases(pairs)
    return Lexicons(lexicons)


def load_data(cfg: Config, run: RunDir, *, resume: bool, world: World = SINGLE) -> TrainData:
    """Open (or prepare) the training data; rank 0 saves the pipeline (a multilingual one with its
    language tokens' place, data.lang_token), config and the prepared data's key into a new run,
    and a resumed run goes on with the data it was trained on."""
    train_cfg, data_cfg = cfg.train, cfg.data
    if train_cfg.init_from:
        init_pipeline(cfg)  # the run it starts from: checked against its checksums before use
    prepared = _resumed_data(run, cfg, world) if resume else prepare(data_cfg, world=world, init_from=train_cfg.init_from)
    fragments = None  # a bilingual run's word links: counted once, for its phrases and its augmentation
    if not resume and world.main:
        pipeline = prepared.pipeline.with_placement(data_cfg.lang_token)
        if prepared.pipeline.languages is None:
            fragments = Fragments.for_pipeline(prepared_examples(prepared), prepared.pipeline)
        pipeline = pipeline.with_lexicon(source_lexicon(prepared, fragments=fragments))  # for texts typed another way
        pipeline.save(run.path)
        save_config(cfg, run.path / CONFIG)
        write_json(run.path / PREPARED, {"key": prepared.key, "folder": str(prepared.folder), "pairs": len(prepared)})
        run.record_checksums([CONFIG, PREPARED, *run.pipeline_files()])
    barrier(world)
    pipeline = run.pipeline()
    problem = pipeline_difference(pipeline, prepared.pipeline, placement=False)
    if problem:
        raise DataError(f"{run.path}: the run's tokenizers and vocabularies are not those of its prepared data "
                        f"{prepared.folder}: {problem}")
    inputs = prepared.manifest["inputs"]
    targets = [Direction.parse(i["pair"], f"{prepared.folder}: manifest inputs[{n}].pair", error=DataError).target
               if "pair" in i else None for n, i in enumerate(inputs)]
    prefixes = [pipeline.language_ids(target) for target in targets] if data_cfg.multilingual else None
    vocab = pipeline.tgt_vocab
    ids = dict(pad_id=vocab.pad_id, bos_id=vocab.bos_id, eos_id=vocab.eos_id)
    extra = prefixes[0] if prefixes else ([], [])
    batching = Batching(train_cfg.batch_size, train_cfg.batch_by, window=train_cfg.length_window, seed=train_cfg.seed, world_size=world.size,
                        accum_steps=train_cfg.accum_steps, src_extra=len(extra[0]) + pipeline.source_eos,
                        tgt_extra=len(extra[1]), src_eos=pipeline.source_eos, **ids)
    if data_cfg.augment.fragments <= 0:
        fragments = None
    elif fragments is None:
        fragments = Fragments.for_pipeline(prepared_examples(prepared), pipeline)
    augment = Augmenter(data_cfg.augment, pipeline, seed=train_cfg.seed, max_len=data_cfg.max_len, fragments=fragments)
    if augment.cases and world.main:  # a case rate that mostly cannot apply is said, not silently lost
        sample = list(prepared_examples(prepared, limit=CASE_SAMPLE))
        for name, share in augment.case_shares(sample).items():
            if share < 0.5:
                log.warning("data.augment.%s: of its changes to the first %d training examples, %.0f%% are too "
                            "long and not made (in this case their pieces are more than twice as many: the "
                            "vocabulary rarely saw it), so it applies to about %.2g of the examples, not %g", name, len(sample),
                            100 * (1 - share), share * getattr(data_cfg.augment, name), getattr(data_cfg.augment, name))
    data = TrainData(prepared, pipeline, corpus_weights(data_cfg, inputs), batching, _val_sets(cfg, pipeline, ids), prefixes,
                     augment if augment.active else None)
    pairs = [i["pairs"] for i in inputs]
    first = None
    if sum(w * n for w, n in zip(data.weights, pairs)) <= batching.window:  # a small corpus: an epoch is one
        first = data.epoch(1).total_batches                                # window, planned at once (where
    if first is not None and first < batching.group:                       # this can happen)
        raise AttnmtError(f"an epoch has {first} batches, fewer than one update takes ({world.size} ranks x "
                          f"train.accum_steps={train_cfg.accum_steps}): lower train.batch_size or train.accum_steps")
    return data


def corpus_weights(data_cfg, inputs: list[dict]) -> list[float]:
    """Examples per epoch over pairs, per corpus of the prepared data (`inputs`: the manifest's):
    its data.train weight, times (multilingual) its direction's share at data.temperature."""
    given = [c.weight for c in data_cfg.train_corpora()] or [1.0]
    weights = [given[i.get("corpus", 0)] for i in inputs]
    if not data_cfg.multilingual:
        return weights
    names = [str(direction) for direction in data_cfg.directions()]
    sizes = [sum(i["pairs"] for i in inputs if i.get("pair") == name) for name in names]
    factor = dict(zip(names, temperature_weights(sizes, data_cfg.temperature)))
    return [w * factor[i["pair"]] for w, i in zip(weights, inputs)]


def _val_sets(cfg: Config, pipeline: TextPipeline, ids: dict) -> list[ValSet]:
    """The validation pairs of every direction, encoded (refused when one has no pairs)."""
    train_cfg, data_cfg = cfg.train, cfg.data
    sets = []
    for direction in data_cfg.directions():
        corpus = load_corpus(corpus_spec(data_cfg), "val", direction if data_cfg.multilingual else None)
        if len(corpus) == 0:  # refused before anything is trained
            raise DataError(f"{corpus.name}: the validation data has no sentence pairs")
        target = direction.target if data_cfg.multilingual else None
        batches = make_batches(pipeline.encode_corpus(corpus, target), batch_size=train_cfg.batch_size, batch_by=train_cfg.batch_by,
                               shuffle=False, **ids)
        sets.append(ValSet(direction, corpus, batches, min(len(corpus), train_cfg.eval_max_sentences or len(corpus)), target))
    return sets


def _resumed_data(run: RunDir, cfg: Config, world: World) -> PreparedData:
    """The prepared data a run was trained on: its folder in the cache, or prepared again from
    the same inputs and settings (the same key: the same data).

    Raises:
        AttnmtError: that data is gone and the inputs or settings changed since.
    """
    recorded = read_json(run.verified(PREPARED)) if (run.path / PREPARED).is_file() else None
    key = recorded.get("key") if isinstance(recorded, dict) else None
    if not isinstance(key, str):  # a run from before prepared data: prepare what its config says
        return prepare(cfg.data, world=world, init_from=cfg.train.init_from)
    if not re.fullmatch(r"[0-9a-f]{8,64}", key):  # a folder name in the cache, never a path
        raise DataError(f"{run.path / PREPARED}: key {key[:80]!r} is not a prepared data key")
    opened = open_key(prepared_root(), key) if world.main else None  # a damaged copy: said, removed
    if broadcast_from_main(world, opened is not None if world.main else None):
        return opened if world.main else PreparedData.open(prepared_root() / key, verify=False)
    prepared = prepare(cfg.data, world=world, init_from=cfg.train.init_from)
    if prepared.key != key:
        plan = make_plan(cfg.data, init_from=cfg.train.init_from)
        raise AttnmtError(f"{run.path} was trained on prepared data {key}, which is no longer in "
                          f"{prepared_root()}, and its inputs or settings changed since "
                          f"({what_changed(plan)}): the run cannot go on with the same data")
    return prepared

