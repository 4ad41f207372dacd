"""Shared fixtures: tiny generated parallel corpora and tiny configs, so CLI tests run in seconds."""

import random

import pytest
import torch

torch.set_num_threads(2)

SRC_WORDS = "hund katze haus baum auto mann frau kind ball wasser rot blau groß klein".split()
TGT_WORDS = "dog cat house tree car man woman child ball water red blue big small".split()


def make_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """Word-for-word 'translations' of random sentences (a task a tiny model learns fast)."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        idx = [rng.randrange(len(SRC_WORDS)) for _ in range(rng.randint(2, 6))]
        src = " ".join(SRC_WORDS[i] for i in idx).capitalize() + " ."
        tgt = " ".join(TGT_WORDS[i] for i in idx).capitalize() + " ."
        pairs.append((src, tgt))
    return pairs


@pytest.fixture
def toy_corpus(tmp_path):
    """Files toy/{train,valid,test}.{de,en} in tmp_path; returns the folder."""
    folder = tmp_path / "toy"
    folder.mkdir()
    for split, n, seed in (("train", 600, 1), ("valid", 40, 2), ("test", 40, 3)):
        pairs = make_pairs(n, seed)
        (folder / f"{split}.de").write_text("\n".join(s for s, _ in pairs) + "\n", encoding="utf-8")
        (folder / f"{split}.en").write_text("\n".join(t for _, t in pairs) + "\n", encoding="utf-8")
    return folder


@pytest.fixture
def toy_config(tmp_path, toy_corpus):
    """A tiny RNN config over the toy corpus."""
    path = tmp_path / "toy.yaml"
    path.write_text(f"""
data:
  corpus: files
  src_lang: de
  tgt_lang: en
  train: {toy_corpus}/train
  valid: {toy_corpus}/valid
  test: {toy_corpus}/test
model:
  arch: rnn
  emb_dim: 16
  enc_hidden: 24
  dec_hidden: 32
  attn_dim: 24
  dropout: 0.0
train:
  epochs: 6
  batch_size: 16
  lr: 1.0e-2
  log_every: 10
search:
  beam_size: 3
""")
    return path
