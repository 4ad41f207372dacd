"""The cache of prepared data: what to prepare (`Plan`: the settings that change the ids, the
inputs and their sha256) and its key, the folder of that key in $ATTNMT_CACHE/prepared, and
how a plan differs from what was prepared from the same files before.

A key is the sha256 of the format, those settings, the inputs' sha256 and the tokenizer
libraries' versions: the same key, the same ids. A folder appears under its key only whole (it
is prepared beside it, `Plan.partial`, and renamed), and preparations of one key take turns
(`Plan.lock`). Reading a whole folder takes no lock (a read-only cache is usable); a folder
that is damaged or incomplete (no manifest) is said and removed under the lock (`discard`),
then prepared again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Iterator

from attnmt.untrusted import load_json, read_input
from attnmt.data.corpus import CorpusFiles, RawChunk, cache_dir, read_chunks, train_files
from attnmt.data.languages import Languages
from attnmt.data.prepared import FORMAT, MANIFEST, PIPELINE_FILES, PreparedData, read_manifest
from attnmt.direction import Direction
from attnmt.errors import AttnmtError, DataError, WriteError
from attnmt.files import sha256_file, write_json, writer_lock

log = logging.getLogger("attnmt.data.prepare")  # the messages of `attnmt prepare` keep one logger name

# The data settings that change the prepared ids (data.train's weights do not: they act per epoch).
SETTINGS = ("corpus", "src_lang", "tgt_lang", "tokenizer", "lowercase", "spm_model_type", "spm_vocab_size",
            "spm_joint", "spm_train_sentences", "min_freq", "max_vocab", "max_len", "min_len", "max_len_ratio",
            "drop_identical", "dedup", "train_subset")
SPM_ONLY = ("spm_model_type", "spm_vocab_size", "spm_joint", "spm_train_sentences")
DIGESTS_BYTES = 64 << 20  # digests.json: ~150 bytes an input file; more is not ours (read anew, hashed again)


def prepared_root() -> Path:
    """Where prepared data lives: `$ATTNMT_CACHE/prepared` (see corpus.cache_dir)."""
    return cache_dir() / "prepared"


def tool_versions() -> dict[str, str]:
    """The tokenizer libraries, whose output may change between versions."""
    found = {}
    for name in ("sentencepiece", "sacremoses"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "none"
    return found


@dataclass(frozen=True)
class Plan:
    """What to prepare: the settings that decide the ids, the input files and their sha256, the key."""

    settings: dict
    corpora: tuple[CorpusFiles, ...]
    digests: tuple[tuple[str, ...], ...]  # per corpus, per file
    key: str
    root: Path
    init_from: str | None = None  # a run whose tokenizers and vocabularies the ids are in (train.init_from)

    @property
    def folder(self) -> Path:
        return self.root / self.key

    @property
    def partial(self) -> Path:
        """Where the folder is prepared before it is renamed into place."""
        return self.root / f".{self.key}.partial"

    @property
    def lock(self) -> str:
        """The name of the lock file (in `root`) that preparations of this key take turns on."""
        return lock_name(self.key)

    def names(self) -> str:
        """The corpora's names, for messages."""
        return ", ".join(c.name for c in self.corpora)

    def inputs(self) -> list[dict]:
        return [{"files": [str(p) for p in c.paths], "sha256": list(d), "corpus": c.corpus,
                 **({} if c.direction is None else {"pair": str(c.direction)})}
                for c, d in zip(self.corpora, self.digests)]

    def languages(self) -> Languages | None:
        """A multilingual plan's directions (their tokens join the vocabulary)."""
        directions = self.settings.get("directions")
        return None if directions is None else Languages(tuple(Direction.parse(d, "manifest: directions", error=DataError)
                                                               for d in directions))

    def chunks(self) -> Iterator[tuple[int, RawChunk]]:
        """(corpus index, chunk) of all corpora in order, cut after data.train_subset pairs."""
        left = self.settings["train_subset"]
        for index, files in enumerate(self.corpora):
            for chunk in read_chunks(files):
                if left is not None:
                    if left <= 0:
                        return
                    if len(chunk) > left:
                        chunk = RawChunk(files, chunk.first_line, chunk.src[:left],
                                         None if chunk.tgt is None else chunk.tgt[:left])
                    left -= len(chunk)
                yield index, chunk


def preparation_settings(data_cfg: Any) -> dict:
    """The settings of `data_cfg` that change the prepared ids, and nothing that does not (a
    multilingual config: its directions instead of src_lang / tgt_lang)."""
    settings = {key: getattr(data_cfg, key) for key in SETTINGS}
    if settings["tokenizer"] == "moses":
        for key in SPM_ONLY:
            del settings[key]
    elif not settings["lowercase"]:  # the keys of data prepared before sentencepiece could lowercase stay
        del settings["lowercase"]
    if data_cfg.multilingual:
        del settings["src_lang"], settings["tgt_lang"]
        settings["directions"] = [str(d) for d in data_cfg.directions()]
    return settings


def make_plan(data_cfg: Any, root: Path | None = None, init_from: str | None = None) -> Plan:
    """The plan of `data_cfg`'s training data (the inputs are hashed, or their sha256 is taken from
    the digest cache when their size and modification time have not changed).

    Raises:
        DataError: an input is missing or unreadable.
    """
    root = Path(root) if root is not None else prepared_root()
    corpora = tuple(train_files(data_cfg))
    known = _DigestCache(root / "digests.json")
    digests = tuple(tuple(known.digest(path) for path in c.paths) for c in corpora)
    known.save()
    settings = preparation_settings(data_cfg)
    if init_from:  # the given tokenizers and vocabularies decide the ids: their content is in the key
        folder = Path(init_from)
        names = [*PIPELINE_FILES, *sorted(p.name for p in folder.glob("*.model"))]
        settings["init_pipeline"] = hashlib.sha256("".join(
            f"{name}:{sha256_file(folder / name)}\n" for name in names).encode()).hexdigest()
    identity = json.dumps({"format": FORMAT, "settings": settings, "inputs": digests, "versions": tool_versions()},
                          sort_keys=True)
    return Plan(settings, corpora, digests, hashlib.sha256(identity.encode()).hexdigest()[:24], root,
                str(init_from) if init_from else None)


class _DigestCache:
    """sha256 of input files, remembered by (path, size, modification time, inode)."""

    def __init__(self, path: Path):
        self.path, self.changed = path, False
        try:  # a regular file only (a FIFO in its place would block): untrusted.read_input
            found = load_json(read_input(path, limit=DIGESTS_BYTES).decode("utf-8"), source=str(path))
        except (OSError, UnicodeDecodeError, AttnmtError):
            found = {}
        self.entries: dict = found if isinstance(found, dict) else {}

    def digest(self, path: Path) -> str:
        try:
            stat = path.stat()
        except OSError as err:
            raise DataError(f"{path}: cannot read ({err.strerror or err})") from None
        key, stamp = str(path.resolve()), [stat.st_size, stat.st_mtime_ns, stat.st_ino]
        entry = self.entries.get(key)
        if isinstance(entry, dict) and entry.get("stat") == stamp and isinstance(entry.get("sha256"), str):
            return entry["sha256"]
        try:
            digest = sha256_file(path)
        except OSError as err:
            raise DataError(f"{path}: cannot read ({err.strerror or err})") from None
        self.entries[key] = {"stat": stamp, "sha256": digest}
        self.changed = True
        return digest

    def save(self) -> None:
        if self.changed:
            try:
                write_json(self.path, self.entries, indent=None)
            except (OSError, WriteError) as err:  # a cache that cannot be written (read-only) only costs time
                log.warning("%s: not written (%s); the inputs will be hashed again next time", self.path, err)


def lock_name(key: str) -> str:
    """The lock file (in the cache's root) that the writers of the folder `key` take turns on."""
    return f".{key}.lock"


def _open(folder: Path) -> tuple[PreparedData | None, str]:
    """The prepared folder, checked; or None and what is wrong with it ("" when it does not exist).
    Something in a folder's place that is not one (a file, a FIFO, a link) is damage, as is a
    file inside it that cannot be read (a FIFO where an array was: refused, never read)."""
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return None, ""
    except OSError as err:
        return None, f"{folder}: cannot be read ({err.strerror or err})"
    if not stat.S_ISDIR(mode):
        return None, f"{folder}: is {_kind(mode)}, not a prepared folder"
    if not (folder / MANIFEST).is_file():
        return None, f"{folder / MANIFEST}: missing (an incomplete or damaged preparation)"
    try:
        return PreparedData.open(folder), ""
    except DataError as err:
        return None, str(err)
    except OSError as err:  # a file of it that is not a regular one, or unreadable
        return None, f"{err.filename or folder}: cannot be read ({err.strerror or err})"


def _kind(mode: int) -> str:
    return ("a symbolic link" if stat.S_ISLNK(mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(mode)
            else "a regular file" if stat.S_ISREG(mode) else "a device or socket")


def discard(folder: Path, why: str) -> None:
    """Remove a folder of the cache that cannot be used (a link: the link only; a file, FIFO or
    device in a folder's place: that entry only, never opened: shutil.rmtree opens what it is
    given, and a FIFO would block it for ever, issue 66 group E), in a warning naming it and why
    (`why` "": said already). Its writers' lock must be held.

    Raises:
        WriteError: it could not be removed (a read-only cache): names it.
    """
    if why:
        log.warning("discarding %s: %s", folder, why)
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            folder.unlink()
        else:
            shutil.rmtree(folder)  # its entries are unlinked, never opened
    except FileNotFoundError:
        pass
    except OSError as err:
        raise WriteError(f"{folder}: could not be removed ({err.strerror or err}); remove it, then run this "
                         f"again") from None


def open_cached(plan: Plan, *, heal: bool = True) -> tuple[PreparedData | None, str]:
    """The cached folder of the plan, checked; or None and why it must be prepared. With `heal`
    (the key's lock held) a damaged or incomplete folder is said and removed; without, it is
    left as it is (a read needs no lock: a folder appears under its key only whole)."""
    data, problem = _open(plan.folder)
    if data is not None:
        log.info("using the prepared data in %s (%d pairs)", plan.folder, len(data))
        return data, ""
    if not problem:
        return None, what_changed(plan) if heal else "not prepared yet"
    if heal:
        log.warning("refusing the prepared data in %s: %s; discarding it and preparing it again", plan.folder,
                    problem)
        discard(plan.folder, "")
    return None, f"the cached copy was damaged: {problem}"


def open_key(root: Path, key: str) -> PreparedData | None:
    """The prepared folder `key` in `root` (the one a run recorded), checked; None when it is
    gone, or damaged (then said and removed under its lock, to be prepared again)."""
    folder = root / key
    data, problem = _open(folder)
    if data is not None or not problem:
        return data
    with writer_lock(root, name=lock_name(key), wait=True):
        data, problem = _open(folder)
        if data is None and problem:
            log.warning("refusing the prepared data in %s: %s; discarding it and preparing it again", folder,
                        problem)
            discard(folder, "")
    return data


def what_changed(plan: Plan) -> str:
    """How the plan differs from the newest prepared folder of the same input files, in words."""
    paths = [[str(p) for p in c.paths] for c in plan.corpora]
    newest, found = -1.0, None
    for path in plan.root.glob(f"*/{MANIFEST}"):
        try:
            manifest = read_manifest(path.parent)
        except DataError:
            continue
        if [i.get("files") for i in manifest.get("inputs", [])] == paths and path.stat().st_mtime > newest:
            newest, found = path.stat().st_mtime, manifest
    if found is None:
        return "nothing prepared from these files yet"
    changes = [f"{f} changed (sha256 {old[:12]}... -> {new[:12]}...)"
               for inputs, digests in zip(found["inputs"], plan.digests)
               for f, old, new in zip(inputs["files"], inputs.get("sha256", []), digests) if old != new]
    old_settings = found["settings"]
    changes += [f"data.{key}: {old_settings[key]!r} -> {value!r}" for key, value in plan.settings.items()
                if key in old_settings and old_settings[key] != value]  # a tokenizer's own keys: its change says it
    if not changes:
        changes = ["the tokenizer libraries changed"]  # the only other part of the key
    return "since the last preparation of these files: " + "; ".join(changes)
