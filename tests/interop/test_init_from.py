"""`train.init_from: RUN`: fine-tuning starts from the run's weights, tokenizers and vocabularies
(an imported Marian model here); keys set against that run are refused, each named."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import yaml

from support import parts  # noqa: E402
parts.require_transformers()  # skips the module without the extra attnmt[hf]

from support import toy  # noqa: E402

from attnmt.config import config_from_dict  # noqa: E402
from attnmt.data.pipeline import pipeline_difference  # noqa: E402
from attnmt.errors import ConfigError  # noqa: E402
from attnmt.run_dir import RunDir  # noqa: E402
from attnmt.training.init_from import resolve_init_from  # noqa: E402


def fine_tune_config(tmp_path, run, **train) -> dict:
    corpus = toy.write_corpus(tmp_path / "corpus", "copy")
    return {"data": {"corpus": "files", "train": f"{corpus}/train", "valid": f"{corpus}/valid",
                     "test": f"{corpus}/test", "train_subset": 64, "augment": dict(toy.NO_NOISE)},  # the pairs as written
            "model": {"dropout": 0.0},
            "train": {"init_from": str(run), "epochs": 1, "batch_size": 16, "device": "cpu", "eval_max_sentences": 4,
                      "log_every": 1, **train}}


def test_fine_tuning_starts_from_the_imported_run(marian_run, tmp_path):
    config = tmp_path / "fine_tune.yaml"
    config.write_text(yaml.safe_dump(fine_tune_config(tmp_path, marian_run, lr=1e-9)), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "attnmt", "train", str(config), "--run-dir", str(tmp_path / "tuned")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    base, tuned = RunDir(marian_run), RunDir(tmp_path / "tuned")
    cfg = tuned.config()
    assert cfg.model.activation == "swish" and cfg.model.positions == "sinusoidal_halves"  # taken from the run
    assert cfg.data.tokenizer == "sentencepiece" and not cfg.data.spm_joint
    assert pipeline_difference(tuned.pipeline(), base.pipeline()) is None and tuned.pipeline().source_eos
    for (name, a), b in zip(base.load_model().state_dict().items(), tuned.load_model().state_dict().values()):
        assert torch.allclose(a, b, atol=1e-5), name  # lr 1e-9: the weights it started from


def test_keys_that_conflict_with_the_init_run_are_named(marian_run, tmp_path):
    raw = fine_tune_config(tmp_path, marian_run)
    raw["model"].update(arch="transformer", d_model=64, heads=4, dropout=0.3)  # dropout may differ
    raw["data"].update(spm_vocab_size=100)  # a key left at its default takes the run's value instead
    with pytest.raises(ConfigError, match=r"model.d_model=64 \(the run has 32\); model.heads=4 \(the run has 2\); "
                                          r"data.spm_vocab_size=100 \(the run has \d+\)"):
        resolve_init_from(config_from_dict(raw))
    raw = fine_tune_config(tmp_path / "again", tmp_path / "no-such-run")
    with pytest.raises(ConfigError, match="train.init_from=.*no-such-run"):
        resolve_init_from(config_from_dict(raw))


def test_fine_tuning_batches_are_the_init_runs_encoding_with_its_source_eos(marian_run, tmp_path):
    """The prepared data of a fine-tuning config are in the init run's ids (its sentencepiece
    models and vocabularies, none trained) and its batches end each source with eos, as the
    imported model expects: each pair as the init run's own pipeline encodes it."""
    from attnmt.data.corpus import load_corpus, corpus_spec
    from attnmt.training.train_data import load_data

    raw = fine_tune_config(tmp_path, marian_run)
    cfg = resolve_init_from(config_from_dict(raw))
    run = RunDir(tmp_path / "tuned")
    run.path.mkdir()
    data = load_data(cfg, run, resume=False)
    base = RunDir(marian_run).pipeline()
    assert data.prepared.manifest["settings"]["init_pipeline"]  # the init run's files are in the key
    assert pipeline_difference(data.prepared.pipeline, base) is None
    corpus = load_corpus(corpus_spec(cfg.data), "train")
    batch = next(iter(data.epoch(1).updates(0))).batches[0]
    vocab = base.src_vocab
    for row, index in zip(batch.src_ids.tolist(), batch.index.tolist()):
        ids = [i for i in row if i != vocab.pad_id]
        line = int(data.prepared.origin(index).rsplit(":", 1)[1])  # its line in the training file, from 1
        assert ids == base.encode_source(corpus.src[line - 1]) and ids[-1] == vocab.eos_id
