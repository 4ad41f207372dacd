"""Prepared data (data/prepare.py, data/prepared.py): the ids equal the pipeline's own encoding of
every kept pair, workers equal one process, filters are counted exactly, a second preparation is
reused and a changed input or setting is said, damaged files are refused, the spm sample is
uniform. Every expected value is computed here, independently of the code under test."""

from __future__ import annotations

import gzip
import json
import logging
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from support import toy
from attnmt.config import config_from_dict
from attnmt.data import corpus as corpus_module
from attnmt.data.corpus import CorpusFiles, RawChunk
from attnmt.data.prepare import prepare
from attnmt.data.prepared import PreparedData
from attnmt.data.tokenizer_training import sample_pairs
from attnmt.data.tokenizers import MosesTokenizer
from attnmt.data.vocab import Vocab
from attnmt.errors import DataError


def data_config(folder: Path, **data):
    cfg = config_from_dict(yaml.safe_load(toy.config_text(folder, data=data)))
    return cfg.data


def all_ids(prepared: PreparedData, side: str) -> list[list[int]]:
    return [ids.tolist() for ids in prepared.ids(side, np.arange(len(prepared)))]


@pytest.mark.parametrize("tokenizer", ["moses", "sentencepiece"])
def test_prepared_ids_are_the_pipelines_own_encoding_of_every_pair(tmp_path, toy_corpus, tokenizer):
    extra = {"spm_vocab_size": 40} if tokenizer == "sentencepiece" else {"min_freq": 2}
    prepared = prepare(data_config(toy_corpus, tokenizer=tokenizer, **extra), workers=1)
    p = prepared.pipeline
    src = (toy_corpus / "train.de").read_text(encoding="utf-8").splitlines()
    tgt = (toy_corpus / "train.en").read_text(encoding="utf-8").splitlines()
    assert len(prepared) == len(src) == 600
    # the ids an inference-time encoding gives (tokenize, then look up), pair by pair, in file order
    assert all_ids(prepared, "src") == [p.encode_source(s) for s in src]
    assert all_ids(prepared, "tgt") == [p.encode_target(t) for t in tgt]
    assert prepared.parts[0].arrays["lines"].tolist() == list(range(1, 601))
    # the vocabulary counted here from the tokenized text: the same tokens in the same order
    if tokenizer == "moses":
        expected = Vocab.build([MosesTokenizer("de").tokenize(s) for s in src], min_freq=2)
        assert p.src_vocab == expected
    else:
        assert p.src_vocab is p.tgt_vocab or p.src_vocab == p.tgt_vocab  # joint
        pieces = Counter(t for text in src + tgt for t in p.src_tokenizer.tokenize(text))
        assert p.src_vocab == Vocab.from_counts(pieces)
    assert prepared.parts[0].arrays["src.ids"].dtype == np.uint16  # a small vocabulary: 2 bytes an id


def test_sentencepiece_on_lowercased_text(tmp_path, toy_corpus):
    """data.lowercase with sentencepiece: the model is trained on the lowercased text (the pieces
    of a model trained here on it), encoding lowercases, and a cased setting keeps its old key."""
    import sentencepiece as spm

    from attnmt.data.cache import preparation_settings

    cfg = data_config(toy_corpus, tokenizer="sentencepiece", spm_vocab_size=40, lowercase=True)
    assert preparation_settings(cfg)["lowercase"] is True
    assert "lowercase" not in preparation_settings(data_config(toy_corpus, tokenizer="sentencepiece"))
    prepared = prepare(cfg, workers=1)
    p = prepared.pipeline
    src = (toy_corpus / "train.de").read_text(encoding="utf-8").splitlines()
    tgt = (toy_corpus / "train.en").read_text(encoding="utf-8").splitlines()
    assert all_ids(prepared, "src") == [p.encode_source(s) for s in src]
    ascii_src = [s for s in src[:50] if s.isascii()]  # str.upper is not undone by str.lower beyond ASCII (ß)
    assert ascii_src and all(p.encode_source(s.upper()) == p.encode_source(s) for s in ascii_src)
    spm.SentencePieceTrainer.train(sentence_iterator=iter([t.lower() for t in src + tgt]),
                                   model_prefix=str(tmp_path / "ref"), vocab_size=40, model_type="bpe",
                                   character_coverage=1.0, hard_vocab_limit=False, num_threads=1, minloglevel=2)
    ref = spm.SentencePieceProcessor(model_file=str(tmp_path / "ref.model"))
    assert [p.src_tokenizer.tokenize(s) for s in src] == [ref.encode(s.lower(), out_type=str) for s in src]
    assert not any(c.isupper() for piece in p.src_tokenizer.pieces() for c in piece)


def test_workers_write_the_same_files_as_one_process(tmp_path, toy_corpus, monkeypatch):
    monkeypatch.setattr(corpus_module, "CHUNK_LINES", 64)  # 600 pairs: 10 chunks, several per worker
    d = data_config(toy_corpus, tokenizer="sentencepiece", spm_vocab_size=40)
    one = prepare(d, workers=1, root=tmp_path / "one")
    two = prepare(d, workers=2, root=tmp_path / "two")
    assert one.key == two.key
    digests = {name: info["sha256"] for name, info in one.manifest["files"].items()}
    assert digests == {name: info["sha256"] for name, info in two.manifest["files"].items()}
    assert two.manifest["prepared"]["workers"] == 2


def write_pairs(folder: Path, pairs: list[tuple[str, str]], *, gz: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for lang, side in (("de", 0), ("en", 1)):
        text = "".join(pair[side] + "\n" for pair in pairs).encode("utf-8")
        path = folder / (f"train.{lang}.gz" if gz else f"train.{lang}")
        path.write_bytes(gzip.compress(text) if gz else text)
    for split in ("valid", "test"):
        (folder / f"{split}.de").write_text("hund\n", encoding="utf-8")
        (folder / f"{split}.en").write_text("dog\n", encoding="utf-8")
    return folder / "train"


def test_every_filter_is_counted_exactly(tmp_path):
    """A corpus built with known numbers of pairs for each filter (and duplicates among the
    survivors); the manifest's counts equal them, and the kept pairs are the ones expected."""
    good = [(f"hund {w}", f"dog {w}") for w in "a b c d e f g h".split()]   # 2 tokens a side
    pairs = (good + [("", "dog"), ("hund", "  ")] * 2                   # empty: 4
             + [("same text", "same text")] * 3                         # identical: 3
             + [(" ".join(["hund"] * 9), "dog dog")]                    # too long (max_len 8): 1
             + [("hund", "dog")] * 2                                    # too short (min_len 2): 2
             + [("hund katze maus", " ".join(["dog"] * 7))]             # ratio 7/3 > 2: 1
             + good[:3] + good[:1])                                     # duplicates: 4
    prefix = write_pairs(tmp_path / "c", pairs)
    d = config_from_dict({"data": dict(corpus="files", train=str(prefix), valid=str(tmp_path / "c/valid"),
                                       max_len=8, min_len=2, max_len_ratio=2.0, drop_identical=True,
                                       dedup=True)}).data
    prepared = prepare(d, workers=1)
    counts = prepared.manifest["counts"]
    assert counts["read"] == len(pairs)
    assert counts["dropped"] == {"empty": 4, "identical": 3, "too_long": 1, "too_short": 2, "ratio": 1,
                                 "duplicate": 4}
    assert counts["kept"] == len(prepared) == len(good)
    assert prepared.parts[0].arrays["lines"].tolist() == list(range(1, 9))  # the first of each duplicate kept
    src_vocab = prepared.pipeline.src_vocab
    assert [src_vocab.decode(ids) for ids in prepared.ids("src", np.arange(8))] == [s.split() for s, _ in good]


def test_weights_do_not_change_the_prepared_data_and_several_corpora_are_one_index(tmp_path):
    a = write_pairs(tmp_path / "a", [("hund rot", "dog red")] * 5)
    b = write_pairs(tmp_path / "b", [("katze blau", "cat blue"), ("baum", "tree")], gz=True)
    def cfg(weights):
        return config_from_dict({"data": dict(corpus="files", valid=str(tmp_path / "a/valid"), train=[
            {"path": str(a), "weight": weights[0]}, {"path": str(b), "weight": weights[1]}])}).data
    one, three = prepare(cfg((1, 1)), workers=1), prepare(cfg((3, 0.5)), workers=1)
    assert one.folder == three.folder  # weights act per epoch, not on the prepared ids
    assert len(one) == 7 and one.corpus_of.tolist() == [0] * 5 + [1] * 2
    assert [i["pairs"] for i in one.manifest["inputs"]] == [5, 2]
    assert one.origin(6) == f"{b}.de.gz + {b}.en.gz:2"


def test_a_second_preparation_is_reused_and_a_change_is_named(tmp_path, toy_corpus, caplog):
    d = data_config(toy_corpus)
    first = prepare(d, workers=1)
    with caplog.at_level(logging.INFO, logger="attnmt.data.prepare"):
        again = prepare(d, workers=1)
    assert again.folder == first.folder and "using the prepared data" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="attnmt.data.prepare"):
        other = prepare(data_config(toy_corpus, max_len=5), workers=1)
    assert other.folder != first.folder
    assert "data.max_len: 100 -> 5" in caplog.text
    caplog.clear()
    with open(toy_corpus / "train.en", "a", encoding="utf-8") as handle:  # one pair more: both files change
        handle.write("Dog .\n")
    with open(toy_corpus / "train.de", "a", encoding="utf-8") as handle:
        handle.write("Hund .\n")
    with caplog.at_level(logging.INFO, logger="attnmt.data.prepare"):
        changed = prepare(d, workers=1)
    assert changed.folder not in (first.folder, other.folder) and len(changed) == 601
    assert f"{toy_corpus / 'train.de'} changed (sha256" in caplog.text


def damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # one bit of the last byte: same size, other content
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", ["part000/src.ids.npy", "part000/tgt.offsets.npy", "part000/lines.npy",
                                  "vocab.tgt.json", "tokenizers.json"])
def test_a_damaged_file_is_refused_and_prepared_again(tmp_path, toy_corpus, caplog, name):
    d = data_config(toy_corpus)
    first = prepare(d, workers=1)
    expected = {n: i["sha256"] for n, i in first.manifest["files"].items()}
    damage(first.folder / name)
    with pytest.raises(DataError, match=rf"{name}: sha256 .* damaged or was changed"):
        PreparedData.open(first.folder)
    with caplog.at_level(logging.WARNING, logger="attnmt.data.prepare"):
        again = prepare(d, workers=1)
    assert f"refusing the prepared data in {first.folder}" in caplog.text and name in caplog.text
    assert {n: i["sha256"] for n, i in again.manifest["files"].items()} == expected  # the same data, intact


def test_a_consistent_but_wrong_manifest_is_refused_by_the_structure_checks(tmp_path, toy_corpus):
    """An edit that keeps the digests right (the manifest's sha256 updated too) still cannot
    make attnmt read past an array: offsets and lengths are checked against each other."""
    from attnmt.files import sha256_file

    folder = prepare(data_config(toy_corpus), workers=1).folder
    lengths = np.load(folder / "part000/src.lengths.npy")
    lengths[0] += 1
    np.save(folder / "part000/src.lengths.npy", lengths)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["part000/src.lengths.npy"] = {"bytes": (folder / "part000/src.lengths.npy").stat().st_size,
                                                    "sha256": sha256_file(folder / "part000/src.lengths.npy")}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"src\.offsets\.npy: offsets and src\.lengths\.npy disagree near pair 0"):
        PreparedData.open(folder)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.update(format=99), r"format 99, expected 1"),
    (lambda m: m.pop("files"), r"'files' is missing"),
    (lambda m: m["files"].update({"../evil": {"sha256": "0" * 64, "bytes": 1}}), r"names '\.\./evil', outside"),
    (lambda m: m["files"].pop("part000/src.ids.npy"), r"'files' does not name part000/src\.ids\.npy"),
    (lambda m: m["files"].update({"part000/gone.npy": {"sha256": "0" * 64, "bytes": 1}}), r"part000/gone\.npy: missing"),
    (lambda m: m.update(parts=[]), r"'parts' must list distinct part folders"),
    (lambda m: m["settings"].update(max_len="100"), r"settings\.max_len must be a positive integer"),
])
def test_a_bad_manifest_is_refused_naming_it(tmp_path, toy_corpus, edit, message):
    folder = prepare(data_config(toy_corpus), workers=1).folder
    manifest = json.loads((folder / "manifest.json").read_text())
    edit(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=message):
        PreparedData.open(folder)
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(DataError, match=r"manifest\.json"):
        PreparedData.open(folder)


def test_bad_input_names_the_file_and_line_and_nothing_is_cached(tmp_path):
    prefix = write_pairs(tmp_path / "c", [("hund", "dog")] * 3)
    (tmp_path / "c/train.en").write_bytes(b"dog\n\xff\xfe\ndog\n")
    d = config_from_dict({"data": dict(corpus="files", train=str(prefix), valid=str(tmp_path / "c/valid"))}).data
    with pytest.raises(DataError, match=r"train\.en:2: invalid UTF-8"):
        prepare(d, workers=1)
    assert not list((tmp_path / "cache" / "prepared").glob("[0-9a-f]*/manifest.json"))


def chunks_of(pairs: list[tuple[str, str]], size: int):
    files = CorpusFiles(Path("s"), Path("t"))
    for start in range(0, len(pairs), size):
        part = pairs[start:start + size]
        yield 0, RawChunk(files, start + 1, [s.encode() for s, _ in part], [t.encode() for _, t in part])


def test_reservoir_sample_is_uniform_ordered_and_whole_when_small():
    pairs = [(f"s{i}", f"t{i}") for i in range(40)]
    assert sample_pairs(chunks_of(pairs, 7), 50, "x") == pairs  # fewer than asked: all, in order
    seen = Counter()
    trials, k = 2000, 5
    for trial in range(trials):
        sample = sample_pairs(chunks_of(pairs, 7), k, f"seed{trial}")
        assert len(sample) == k and sample == sorted(sample, key=lambda p: int(p[0][1:]))
        seen.update(s for s, _ in sample)
    expected = trials * k / len(pairs)  # 250 for each pair
    chi2 = sum((seen[f"s{i}"] - expected) ** 2 / expected for i in range(len(pairs)))
    assert chi2 < 80  # 39 degrees of freedom: P(chi2 > 80) < 1e-4 for a uniform sampler
    empty = [("", "t")] * 3 + pairs[:2]
    assert sample_pairs(chunks_of(empty, 2), 10, "x") == pairs[:2]  # empty sides left out


def _prepare_rank(rank, cfg_data, root):
    from attnmt.world import init_world

    world, _ = init_world("gloo", __import__("torch").device("cpu"), timeout_s=60)
    prepare(cfg_data, world=world, workers=1, root=root)
    return 0


def test_two_ranks_prepare_one_index_of_the_same_pairs(tmp_path, toy_corpus, monkeypatch):
    """torchrun ranks each encode every other chunk into their own part; the vocabulary, the
    counts and the set of pairs are those of one process (only the order of the pairs differs)."""
    from support.ranks import run_ranks

    monkeypatch.setattr(corpus_module, "CHUNK_LINES", 64)  # 600 pairs: 10 chunks, 5 a rank (forked: they see it)
    d = data_config(toy_corpus, tokenizer="sentencepiece", spm_vocab_size=40, dedup=True)
    assert run_ranks(_prepare_rank, d, tmp_path / "two") == [0, 0]
    one = prepare(d, workers=1, root=tmp_path / "one")
    two = PreparedData.open(next((tmp_path / "two").glob("*/manifest.json")).parent)
    assert two.key == one.key and two.manifest["parts"] == ["part000", "part001"]
    assert two.pipeline.src_vocab == one.pipeline.src_vocab
    assert two.manifest["counts"] == one.manifest["counts"] and two.manifest["sides"] == one.manifest["sides"]
    for rank, part in enumerate(two.parts):  # rank 0: chunks 0, 2, 4, 6, 8; rank 1: chunks 1, 3, 5, 7, 9
        assert len(part) and {(line - 1) // 64 % 2 for line in part.arrays["lines"].tolist()} == {rank}

    def pairs(data):
        lines = np.concatenate([p.arrays["lines"] for p in data.parts]).tolist()
        return sorted(zip(lines, map(tuple, all_ids(data, "src")), map(tuple, all_ids(data, "tgt"))))

    assert pairs(two) == pairs(one)


SCRIPT_WITHOUT_GUARD = """
import sys
from attnmt.config import config_from_dict
from attnmt.data import corpus
from attnmt.data.prepare import prepare
corpus.CHUNK_LINES = 64  # several chunks: the workers start
cfg = config_from_dict({"data": dict(corpus="files", train=sys.argv[1], valid=sys.argv[1])})
print(len(prepare(cfg.data, workers=2)))
"""


def test_workers_start_from_a_script_without_a_main_guard(tmp_path, toy_corpus):
    """A user's script that prepares at import level (no `if __name__ == "__main__"`): workers that
    imported it again would run it again and wait forever for the first preparation's lock."""
    import subprocess
    import sys

    script = tmp_path / "script.py"
    script.write_text(SCRIPT_WITHOUT_GUARD)
    done = subprocess.run([sys.executable, str(script), str(toy_corpus / "train")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "600"


HOLD_LOCK = """
import sys, time
from attnmt.files import writer_lock
with writer_lock(sys.argv[1], name=sys.argv[2]):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_second_preparation_of_the_same_data_waits_for_the_first(tmp_path, toy_corpus, caplog):
    """Another process holds the key's lock: this preparation waits, names that process (its pid,
    not this one's), and goes on when the holder dies (the kernel drops its lock)."""
    import subprocess
    import sys
    import threading

    from attnmt.data import cache as cache_module

    d = data_config(toy_corpus)
    plan = cache_module.make_plan(d)
    plan.root.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(plan.root), f".{plan.key}.lock"],
                              stdout=subprocess.PIPE, text=True)
    done = []
    try:
        assert holder.stdout.readline().strip() == "held"
        with caplog.at_level(logging.INFO, logger="attnmt.files"):
            worker = threading.Thread(target=lambda: done.append(prepare(d, workers=1)))
            worker.start()
            worker.join(2.0)
            assert worker.is_alive() and not done  # waiting, not preparing beside it
            waiting = caplog.text
            holder.kill()
            holder.wait(30)
            worker.join(60)
    finally:
        holder.kill()
        holder.wait(30)
    assert len(done) == 1 and len(done[0]) == 600
    assert "waiting for" in waiting and f"pid {holder.pid}" in waiting, waiting  # names the holder
    assert f"pid {os.getpid()}" not in waiting


DYING_WORKER = """
import os, signal, sys
import attnmt.data.encode as encode
parent, encode_chunk = os.getpid(), encode.ChunkEncoder.encode
def dying(self, chunk, corpus):
    if os.getpid() != parent:  # a forked worker: killed as the OOM killer would
        os.kill(os.getpid(), signal.SIGKILL)
    return encode_chunk(self, chunk, corpus)
encode.ChunkEncoder.encode = dying
from attnmt.cli import main
sys.exit(main(["prepare", sys.argv[1], "--workers", "2"]))
"""


def test_a_dead_worker_is_one_line_not_a_hang(tmp_path):
    """A worker process really killed (SIGKILL) while it encodes a chunk: `attnmt prepare` ends
    within the timeout with one line and exit 2, and nothing is cached."""
    import subprocess
    import sys

    folder = tmp_path / "big"
    folder.mkdir()
    for name, pairs in (("train", toy.copy_pairs(25_000, 1)), ("valid", toy.copy_pairs(20, 2))):
        (folder / f"{name}.de").write_text("\n".join(s for s, _ in pairs) + "\n", encoding="utf-8")
        (folder / f"{name}.en").write_text("\n".join(t for _, t in pairs) + "\n", encoding="utf-8")
    config = tmp_path / "big.yaml"
    config.write_text(toy.config_text(folder), encoding="utf-8")
    cache = tmp_path / "cache"
    done = subprocess.run([sys.executable, "-c", DYING_WORKER, str(config)], capture_output=True, text=True,
                          timeout=180, env={**os.environ, "ATTNMT_CACHE": str(cache)})
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("attnmt prepare: error: ")]
    assert len(lines) == 1 and "a preparation worker process died" in lines[0], done.stderr
    assert "nothing was written" in lines[0]
    prepared = cache / "prepared"
    assert not prepared.exists() or not [p for p in prepared.iterdir() if p.is_dir()]  # nothing cached


def test_a_rank_with_no_chunk_writes_an_empty_part(tmp_path, toy_corpus):
    """600 pairs are one chunk: rank 1 of 2 encodes nothing, and the index is rank 0's part."""
    from support.ranks import run_ranks

    d = data_config(toy_corpus)
    assert run_ranks(_prepare_rank, d, tmp_path / "two") == [0, 0]
    two = PreparedData.open(next((tmp_path / "two").glob("*/manifest.json")).parent)
    assert [len(p) for p in two.parts] == [600, 0] and len(two) == 600
    one = prepare(d, workers=1, root=tmp_path / "one")
    assert all_ids(two, "src") == all_ids(one, "src") and all_ids(two, "tgt") == all_ids(one, "tgt")
