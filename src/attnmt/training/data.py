"""The training data of a run: corpora read, the text pipeline built (or loaded on resume), and
each epoch's updates, the same on every rank.

Shapes:
    batch    sentences in a batch
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnmt.config import Config, save_config
from attnmt.data.batching import Batch, make_batches
from attnmt.data.corpus import ParallelCorpus, corpus_spec, load_corpus
from attnmt.data.pipeline import TextPipeline
from attnmt.errors import AttnmtError, DataError
from attnmt.run_dir import CONFIG, RunDir
from attnmt.training.distributed import SINGLE, World, barrier, shard_update
from attnmt.training.init_from import init_pipeline


def new_run_pipeline(cfg: Config, train_corpus: ParallelCorpus, *, cache_dir: Path) -> TextPipeline:
    """The tokenizers and vocabularies a new run uses: those of the run `train.init_from` names
    (an imported or an attnmt run), else ones built on its training corpus."""
    if cfg.train.init_from:
        return init_pipeline(cfg)
    return TextPipeline.build(cfg.data, train_corpus, cache_dir=cache_dir)


@dataclass
class TrainData:
    pipeline: TextPipeline
    train_examples: list
    val_corpus: ParallelCorpus
    val_batches: list[Batch]
    n_val_bleu: int
    batch_args: dict


def load_data(cfg: Config, run: RunDir, *, resume: bool, world: World = SINGLE) -> TrainData:
    """Read the corpora; build the tokenizers and vocabularies (or load them on resume).
    Rank 0 builds and saves them; the other ranks then load what it saved."""
    t, d = cfg.train, cfg.data
    spec = corpus_spec(d)
    train_corpus = load_corpus(spec, "train")
    if d.train_subset:
        train_corpus = ParallelCorpus(train_corpus.src[: d.train_subset], train_corpus.tgt[: d.train_subset],
                                      f"{train_corpus.name}[:{d.train_subset}]")
    val_corpus = load_corpus(spec, "val")
    for corpus, what in ((train_corpus, "training"), (val_corpus, "validation")):
        if len(corpus) == 0:  # refused before anything is built or trained
            raise DataError(f"{corpus.name}: the {what} data has no sentence pairs")
    if not resume and world.main:
        pipeline = new_run_pipeline(cfg, train_corpus, cache_dir=run.path / "cache")
        pipeline.save(run.path)
        save_config(cfg, run.path / CONFIG)
        run.record_checksums([CONFIG, *run.pipeline_files()])
    barrier(world)
    if resume or not world.main:
        pipeline = run.pipeline()
    vocab = pipeline.tgt_vocab
    batch_args = dict(batch_size=t.batch_size, batch_by=t.batch_by, pad_id=vocab.pad_id, bos_id=vocab.bos_id,
                      eos_id=vocab.eos_id)
    train_examples = pipeline.encode_corpus(train_corpus, max_len=d.max_len)
    if not train_examples:
        raise DataError(f"{train_corpus.name}: none of its {len(train_corpus)} sentence pairs is usable: every one "
                        f"is longer than data.max_len={d.max_len} tokens on a side")
    val_batches = make_batches(pipeline.encode_corpus(val_corpus), shuffle=False, **batch_args)
    n_val_bleu = min(len(val_corpus.src), t.eval_max_sentences or len(val_corpus.src))
    return TrainData(pipeline, train_examples, val_corpus, val_batches, n_val_bleu, batch_args)


@dataclass
class Update:
    batches: list[Batch]   # this rank's share
    global_tokens: int     # target tokens of the update on all ranks


def epoch_updates(data: TrainData, t, epoch: int, world: World = SINGLE) -> list[Update]:
    """The epoch's updates, and this rank's share of each.

    Every rank builds the same global batches from (seed, epoch), so a resumed run skips the
    updates already done. An update takes `world.size * train.accum_steps` consecutive batches,
    shared by `shard_update` (token-balanced); the last `len % that` batches of the epoch are
    left out (other ones every epoch), so N ranks and one process with `accum_steps: N` train
    exactly the same updates.

    Raises:
        AttnmtError: fewer batches in an epoch than one update takes.
    """
    batches = make_batches(data.train_examples, shuffle=True, seed=t.seed, epoch=epoch, **data.batch_args)
    group = world.size * t.accum_steps
    if group == 1:
        return [Update([batch], batch.num_tgt_tokens) for batch in batches]
    if len(batches) < group:
        raise AttnmtError(f"an epoch has {len(batches)} batches, fewer than one update takes ({world.size} ranks x "
                          f"train.accum_steps={t.accum_steps}): lower train.batch_size or train.accum_steps")
    updates = []
    for start in range(0, len(batches) - len(batches) % group, group):
        members = batches[start:start + group]
        updates.append(Update(shard_update(members, world.size)[world.rank],
                              sum(batch.num_tgt_tokens for batch in members)))
    return updates
