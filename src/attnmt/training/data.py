"""The training data of a run: the prepared corpus (data.prepare: found in the cache, or prepared
now), the text pipeline saved with the run, the validation batches, and each epoch's updates.

Shapes:
    batch    sentences in a batch
"""

from __future__ import annotations

from dataclasses import dataclass

from attnmt.config import Config, save_config
from attnmt.data.batching import Batch, make_batches
from attnmt.data.corpus import ParallelCorpus, corpus_spec, load_corpus
from attnmt.data.epochs import Batching, Epoch
from attnmt.data.pipeline import TextPipeline, pipeline_difference
from attnmt.data.prepare import make_plan, prepare, prepared_root, what_changed
from attnmt.data.prepared import PreparedData
from attnmt.errors import AttnmtError, DataError
from attnmt.files import read_json, write_json
from attnmt.run_dir import CONFIG, PREPARED, RunDir
from attnmt.world import SINGLE, World, barrier, broadcast_from_main


@dataclass
class TrainData:
    prepared: PreparedData
    pipeline: TextPipeline
    weights: list[float]        # per corpus of data.train: examples per epoch = weight x pairs
    batching: Batching
    val_corpus: ParallelCorpus
    val_batches: list[Batch]
    n_val_bleu: int

    def epoch(self, epoch: int) -> Epoch:
        """Epoch `epoch`'s batches and updates (the same on every rank)."""
        return Epoch(self.prepared, self.weights, self.batching, epoch)


def load_data(cfg: Config, run: RunDir, *, resume: bool, world: World = SINGLE) -> TrainData:
    """Open (or prepare) the training data; rank 0 saves the pipeline, config and the prepared
    data's key into a new run, and a resumed run goes on with the data it was trained on."""
    t, d = cfg.train, cfg.data
    prepared = _resumed_data(run, cfg, world) if resume else prepare(d, world=world)
    if not resume and world.main:
        prepared.pipeline.save(run.path)
        save_config(cfg, run.path / CONFIG)
        write_json(run.path / PREPARED, {"key": prepared.key, "folder": str(prepared.folder), "pairs": len(prepared)})
        run.record_checksums([CONFIG, PREPARED, *run.pipeline_files()])
    barrier(world)
    pipeline = run.pipeline()
    problem = pipeline_difference(pipeline, prepared.pipeline)
    if problem:
        raise DataError(f"{run.path}: the run's tokenizers and vocabularies are not those of its prepared data "
                        f"{prepared.folder}: {problem}")
    val_corpus = load_corpus(corpus_spec(d), "val")
    if len(val_corpus) == 0:  # refused before anything is trained
        raise DataError(f"{val_corpus.name}: the validation data has no sentence pairs")
    vocab = pipeline.tgt_vocab
    ids = dict(pad_id=vocab.pad_id, bos_id=vocab.bos_id, eos_id=vocab.eos_id)
    batching = Batching(t.batch_size, t.batch_by, window=t.length_window, seed=t.seed, world_size=world.size,
                        accum_steps=t.accum_steps, **ids)
    val_batches = make_batches(pipeline.encode_corpus(val_corpus), batch_size=t.batch_size, batch_by=t.batch_by,
                               shuffle=False, **ids)
    n_val_bleu = min(len(val_corpus.src), t.eval_max_sentences or len(val_corpus.src))
    weights = [c.weight for c in d.train_corpora()] or [1.0]
    data = TrainData(prepared, pipeline, weights, batching, val_corpus, val_batches, n_val_bleu)
    pairs = [i["pairs"] for i in prepared.manifest["inputs"]]
    first = None
    if sum(w * n for w, n in zip(weights, pairs)) <= batching.window:  # a small corpus: an epoch is one window,
        first = data.epoch(1).total_batches                           # planned at once (where this can happen)
    if first is not None and first < batching.group:
        raise AttnmtError(f"an epoch has {first} batches, fewer than one update takes ({world.size} ranks x "
                          f"train.accum_steps={t.accum_steps}): lower train.batch_size or train.accum_steps")
    return data


def _resumed_data(run: RunDir, cfg: Config, world: World) -> PreparedData:
    """The prepared data a run was trained on: its folder in the cache, or prepared again from
    the same inputs and settings (the same key: the same data).

    Raises:
        AttnmtError: that data is gone and the inputs or settings changed since.
    """
    recorded = read_json(run.verified(PREPARED)) if (run.path / PREPARED).is_file() else None
    key = recorded.get("key") if isinstance(recorded, dict) else None
    if not isinstance(key, str):  # a run from before prepared data: prepare what its config says
        return prepare(cfg.data, world=world)
    folder = prepared_root() / key
    found = broadcast_from_main(world, (folder / "manifest.json").is_file() if world.main else None)
    if found:
        return PreparedData.open(folder, verify=world.main)
    prepared = prepare(cfg.data, world=world)
    if prepared.key != key:
        plan = make_plan(cfg.data)
        raise AttnmtError(f"{run.path} was trained on prepared data {key}, which is no longer in "
                          f"{prepared_root()}, and its inputs or settings changed since "
                          f"({what_changed(plan)}): the run cannot go on with the same data")
    return prepared

