"""Toy data for every test folder: a 14-word German/English lexicon, two tasks a tiny model learns
in seconds, a writer of corpus folders and the text of tiny configs.

Tasks (`write_corpus(folder, task)`; `write_config(path, task, arch, ...)` writes a corpus and a
config over it):
    copy      word-for-word translation in the same order, capitalised and ending in " ."
              (train/valid/test: 600/40/40 pairs of 2-6 words)
    captions  copy of 4-6 words: no short sentence (as Multi30k's captions)
    reversal  word-for-word translation in reverse order, lower case, no punctuation
              (train/valid/test: 1200/100/100 pairs of 2-7 words)

Imported as `from support import toy`: tests/conftest.py puts tests/ on sys.path, so this works from every
test folder and with a single test file named on the command line.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import torch
import yaml

SRC_WORDS = "hund katze haus baum auto mann frau kind ball wasser rot blau groß klein".split()
TGT_WORDS = "dog cat house tree car man woman child ball water red blue big small".split()
FR_WORDS = "chien chat maison arbre voiture homme femme enfant balle eau rouge bleu grand petit".split()
WORDS = {"de": SRC_WORDS, "en": TGT_WORDS, "fr": FR_WORDS}  # one lexicon in three languages (multiway)


def sets(items: list[str]) -> list[str]:
    """`--set` arguments for the CLI: ["a=1", "b=2"] -> ["--set", "a=1", "--set", "b=2"]."""
    return [arg for item in items for arg in ("--set", item)]


def copy_pairs(n: int, seed: int, *, lengths: tuple[int, int] = (2, 6)) -> list[tuple[str, str]]:
    """Word-for-word 'translations' of random sentences of `lengths` words (inclusive), e.g.
    ("Hund rot .", "Dog red .")."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        idx = [rng.randrange(len(SRC_WORDS)) for _ in range(rng.randint(*lengths))]
        src = " ".join(SRC_WORDS[i] for i in idx).capitalize() + " ."
        tgt = " ".join(TGT_WORDS[i] for i in idx).capitalize() + " ."
        pairs.append((src, tgt))
    return pairs


def reversal_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """Random 'sentences' and their word-for-word translations in reverse order,
    e.g. ("hund rot haus", "house red dog")."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        idx = [rng.randrange(len(SRC_WORDS)) for _ in range(rng.randint(2, 7))]
        pairs.append((" ".join(SRC_WORDS[i] for i in idx), " ".join(TGT_WORDS[i] for i in reversed(idx))))
    return pairs


# task -> (pair maker, ((split, pairs, seed), ...))
TASKS = {
    "copy": (copy_pairs, (("train", 600, 1), ("valid", 40, 2), ("test", 40, 3))),
    "reversal": (reversal_pairs, (("train", 1200, 11), ("valid", 100, 12), ("test", 100, 13))),
    # copy of 4-6 words: a corpus without short sentences, as captions are (its phrase table is used)
    "captions": (lambda n, seed: copy_pairs(n, seed, lengths=(4, 6)), (("train", 600, 4), ("valid", 40, 5),
                                                                         ("test", 40, 6))),
}


def edited_copy(run_dir: Path, dest: Path, *, edits: dict | None = None, **sections: dict) -> Path:
    """A copy of a trained run at `dest` with sections of its config updated
    (`search={"beam_size": 1}`) and each JSON file of `edits` changed in place by its function
    (`edits={"lexicon.json": fn}`, fn(raw) edits the parsed file), the new files' sha256 recorded (an
    edit made on purpose)."""
    import json
    import shutil

    from attnmt.run_dir import RunDir

    shutil.copytree(run_dir, dest)
    edits = dict(edits or {})
    if sections:
        def update(config: dict) -> None:
            for section, values in sections.items():
                config[section].update(values)
        edits = {"config.json": update, **edits}
    for name, edit in edits.items():
        raw = json.loads((dest / name).read_text(encoding="utf-8"))
        edit(raw)
        (dest / name).write_text(json.dumps(raw), encoding="utf-8")
    RunDir(dest).record_checksums(list(edits))
    return dest


def write_corpus(folder: Path, task: str = "copy") -> Path:
    """Write {train,valid,test}.{de,en} of `task` (see TASKS) into a new `folder`; returns it."""
    make_pairs, splits = TASKS[task]
    folder.mkdir(parents=True)
    for split, n, seed in splits:
        pairs = make_pairs(n, seed)
        (folder / f"{split}.de").write_text("\n".join(s for s, _ in pairs) + "\n", encoding="utf-8")
        (folder / f"{split}.en").write_text("\n".join(t for _, t in pairs) + "\n", encoding="utf-8")
    return folder


def write_multiway(folder: Path, langs=("de", "en", "fr"), sizes=(("train", 600, 21), ("valid", 40, 22),
                                                                ("test", 40, 23))) -> Path:
    """The same random sentences word for word in every language of `langs` (lower case, no
    punctuation): {train,valid,test}.{lang} in a new `folder`, a multiway corpus; returns it."""
    folder.mkdir(parents=True)
    for split, n, seed in sizes:
        rng = random.Random(seed)
        sentences = [[rng.randrange(len(SRC_WORDS)) for _ in range(rng.randint(2, 6))] for _ in range(n)]
        for lang in langs:
            text = "".join(" ".join(WORDS[lang][i] for i in idx) + "\n" for idx in sentences)
            (folder / f"{split}.{lang}").write_text(text, encoding="utf-8")
    return folder


MODEL_SIZES = {
    "rnn": dict(emb_dim=16, enc_hidden=24, dec_hidden=32, attn_dim=24),
    "transformer": dict(d_model=32, heads=4, ff_dim=64, enc_layers=2, dec_layers=2),
}
LEARNING_RATES = {"rnn": 1.0e-2, "transformer": 3.0e-3}

# The training seed of every toy config (train.seed). CI runs the tests marked `learned` (they
# assert what a small training learned) a second time under ATTNMT_TEST_SEED=2, so that a bound
# that holds for one seed's luck on one CPU shows up as failing on any machine.
TEST_SEED = int(os.environ.get("ATTNMT_TEST_SEED", "1"))


NO_NOISE = {"lowercase": 0.0, "uppercase": 0.0, "titlecase": 0.0, "typos": 0.0, "no_final_punct": 0.0,
            "diacritics": 0.0, "fragments": 0.0}  # data.augment off (config.NO_AUGMENT, written out)


def config_text(folder: Path, arch: str = "rnn", *, epochs: int = 6, batch_size: int = 16,
                lr: float | None = None, beam_size: int = 3, data: dict | None = None,
                model: dict | None = None, train: dict | None = None, search: dict | None = None) -> str:
    """YAML of a tiny `arch` ("rnn" or "transformer") model, dropout 0, trained on the corpus in
    `folder` (from `write_corpus`). `lr` defaults per arch (LEARNING_RATES); the sizes are
    MODEL_SIZES[arch]; the seed is TEST_SEED. `data`, `model`, `train` and `search` add or override keys of their section.
    The toy runs train without noise (data.augment all 0) unless `data` gives an augment section: what the
    other tests assert was learned from the clean tasks; tests/data/test_augment.py trains with it."""
    if arch not in MODEL_SIZES:
        raise ValueError(f"arch must be one of {sorted(MODEL_SIZES)}; got {arch!r}")
    sections = {
        "data": {**dict(corpus="files", src_lang="de", tgt_lang="en", train=f"{folder}/train",
                        valid=f"{folder}/valid", test=f"{folder}/test", augment=dict(NO_NOISE)), **(data or {})},
        "model": {"arch": arch, **MODEL_SIZES[arch], "dropout": 0.0, **(model or {})},
        "train": {**dict(epochs=epochs, batch_size=batch_size, lr=LEARNING_RATES[arch] if lr is None else lr,
                         log_every=10, seed=TEST_SEED), **(train or {})},
        "search": {"beam_size": beam_size, **(search or {})},
    }
    return yaml.safe_dump(sections, sort_keys=False)



def write_config(path: Path, task: str = "copy", arch: str = "rnn", **options) -> Path:
    """Write the corpus of `task` into the folder beside `path` named for its stem (toy.yaml:
    toy/), and at `path` the config_text(folder, arch, **options) over it; returns `path`."""
    folder = write_corpus(path.with_suffix(""), task)
    path.write_text(config_text(folder, arch, **options), encoding="utf-8")
    return path

# ----------------------------------------------------------------------------- id batches for the model tests

PAD, BOS = 0, 2
SRC_VOCAB, TGT_VOCAB = 11, 13  # ids 4.. are words; 0-3 are pad, unk, bos, eos


def padded_batch(lengths: list[int], *, extra_pad: int = 0, seed: int = 1):
    """Random source ids (batch, max_len + extra_pad) padded with PAD, their mask (True = real
    token) and lengths."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    src_mask = torch.arange(int(lengths.max()) + extra_pad) < lengths[:, None]  # (batch, src_len)
    src_ids = torch.randint(4, SRC_VOCAB, src_mask.shape, generator=gen)
    return src_ids.masked_fill(src_mask.logical_not(), PAD), src_mask, lengths


def target(batch: int, tgt_len: int, seed: int = 2):
    """Random decoder inputs tgt_in (batch, tgt_len): BOS, then random target word ids."""
    gen = torch.Generator().manual_seed(seed)
    tgt_in = torch.randint(4, TGT_VOCAB, (batch, tgt_len), generator=gen)
    tgt_in[:, 0] = BOS
    return tgt_in


def write_multilingual_config(path: Path, *, lang_token: str = "target", epochs: int = 10,
                              langs=("de", "en", "fr"), pairs=None, train_size: int = 300, **train) -> Path:
    """A tiny multilingual Transformer over a multiway corpus of `train_size` sentences a language
    (write_multiway, in the folder beside `path` named for its stem): every direction between
    `langs`, or `pairs`."""
    folder = write_multiway(path.with_suffix(""), langs,
                            sizes=(("train", train_size, 21), ("valid", 40, 22), ("test", 40, 23)))
    sections = yaml.safe_load(config_text(folder, "transformer", epochs=epochs, batch_size=16, lr=5e-3, beam_size=3,
                                          model=dict(enc_layers=1, share_embeddings=True, tie_embeddings=True),
                                          train=dict(num_threads=1, eval_max_sentences=20, **train)))
    data = sections["data"]
    del data["src_lang"], data["tgt_lang"]
    data.update(tokenizer="sentencepiece", spm_vocab_size=80, lang_token=lang_token,
                **({"pairs": list(pairs)} if pairs else {"langs": list(langs)}))
    path.write_text(yaml.safe_dump(sections, sort_keys=False), encoding="utf-8")
    return path


def train_multilingual(tmp_path_factory, placement: str) -> Path:
    """A run of write_multilingual_config's (every direction between de, en, fr; the language token
    where `placement` says), trained once per test session (support/once.py)."""
    from attnmt.cli import main
    from support.once import once

    def build(base):
        config = write_multilingual_config(base / "ml.yaml", lang_token=placement)
        assert main(["train", str(config), "--run-dir", str(base / "run")]) == 0
        return base / "run"

    return once(tmp_path_factory, f"multilingual-{placement}", build)


# ----------------------------------------------------------------------------- runs with random weights

def make_random_run(run_dir, *, pre_norm=True, share=False, tie=False, positions="sinusoidal", seed=0,
                    tokenizer=None):
    """A Transformer run directory with random weights (no training), moses words (or `tokenizer`
    on both sides), and one vocabulary for both sides (so that source and target embeddings can be
    shared)."""
    from attnmt.checkpoint import save_weights, write_json
    from attnmt.config import config_from_dict
    from attnmt.data.pipeline import TextPipeline
    from attnmt.data.tokenizers import MosesTokenizer
    from attnmt.data.vocab import Vocab
    from attnmt.models import build_model

    run_dir.mkdir(parents=True)
    vocab = Vocab([*Vocab.SPECIALS, *dict.fromkeys(SRC_WORDS + TGT_WORDS)])
    cfg = config_from_dict({"model": dict(arch="transformer", d_model=32, heads=4, ff_dim=48, enc_layers=2,
                                          dec_layers=3, pre_norm=pre_norm, share_embeddings=share,
                                          tie_embeddings=tie, positions=positions, dropout=0.0)})
    write_json(run_dir / "config.json", cfg.to_dict())
    tokenizers = (tokenizer, tokenizer) if tokenizer is not None else (MosesTokenizer("de"), MosesTokenizer("en"))
    TextPipeline(*tokenizers, vocab, vocab).save(run_dir)
    torch.manual_seed(seed)
    model = build_model(cfg.model, len(vocab), len(vocab))
    with torch.no_grad():  # perturb everything (LayerNorms, biases) so that no mapping hides behind 0 or 1
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    save_weights(model, run_dir / "checkpoints" / "random.safetensors")
    write_json(run_dir / "best.json", {"file": "checkpoints/random.safetensors"})
    return run_dir
