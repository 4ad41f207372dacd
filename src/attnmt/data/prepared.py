"""The prepared format: one table of a part's arrays (`ARRAYS`), the writer (`PartWriter`,
`write_manifest`) and the reader (`PreparedData`, checked), both from that table.

A prepared folder (made by `prepare.py`, found in the cache by its key) holds manifest.json
(settings, inputs, counts per filter, every file's sha256), the text pipeline (tokenizers.json,
vocab.*.json, *.model) and one folder per rank that prepared it (part000, part001, ...), each
with the arrays of `ARRAYS`. The pairs of all parts, part after part, are the corpus. Arrays are
opened as read-only memory maps: N processes share one copy in the page cache.

`PreparedData.open` refuses a damaged folder (`DataError` naming the file): every file's size and
sha256 against the manifest, then the structure (offsets against lengths, ids below the
vocabulary size, lengths within data.max_len). A file cut while it is open is a `DataError`
naming it at the next read (`check_unchanged`), not a SIGBUS.
"""

from __future__ import annotations

import logging
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from attnmt.untrusted import load_json
from attnmt.data.pipeline import TextPipeline
from attnmt.errors import AttnmtError, DataError
from attnmt.files import sha256_file, write_json

log = logging.getLogger(__name__)

FORMAT = 1                      # the layout of this module; another number is refused
MANIFEST = "manifest.json"
PIPELINE_FILES = ("tokenizers.json", "vocab.src.json", "vocab.tgt.json")  # with the *.model files they name
SIDES = ("src", "tgt")
BLOCK = 1 << 20                 # pairs checked at a time


@dataclass(frozen=True)
class Array:
    """One array of a part, in the file `{name}.npy`, of length `per` (tokens, pairs or pairs + 1)."""

    name: str
    per: str
    dtypes: tuple[type, ...]    # the writer takes the first that holds the largest value (else the last)
    holds: str


LAYOUT = (
    Array("src.ids", "tokens", (np.uint16, np.uint32), "every kept pair's source ids, one pair after the other"),
    Array("src.offsets", "pairs + 1", (np.int64,), "pair i's source ids are src.ids[offsets[i]:offsets[i + 1]]"),
    Array("src.lengths", "pairs", (np.uint16,), "each pair's source length, for sorting without reading ids"),
    Array("tgt.ids", "tokens", (np.uint16, np.uint32), "every kept pair's target ids, one pair after the other"),
    Array("tgt.offsets", "pairs + 1", (np.int64,), "pair i's target ids are tgt.ids[offsets[i]:offsets[i + 1]]"),
    Array("tgt.lengths", "pairs", (np.uint16,), "each pair's target length, for sorting without reading ids"),
    Array("lines", "pairs", (np.uint32, np.uint64), "each pair's line in its input files (1-based)"),
    Array("corpus", "pairs", (np.uint8,), "which corpus of data.train each pair came from"),
)
ARRAYS = tuple(a.name for a in LAYOUT)
_ARRAY = {a.name: a for a in LAYOUT}


def part_name(rank: int) -> str:
    return f"part{rank:03d}"


def is_part_name(name: object) -> bool:
    return isinstance(name, str) and re.fullmatch(r"part\d{3}", name) is not None


def array_file(name: str) -> str:
    """The file of array `name` (one of ARRAYS) in a part's folder."""
    return f"{name}.npy"


def narrowest(name: str, largest: int) -> np.dtype:
    """The type of array `name` for values up to `largest`: the first of its dtypes that holds it
    (ids: uint16 up to a vocabulary of 65,536 tokens)."""
    dtypes = _ARRAY[name].dtypes
    return np.dtype(next((t for t in dtypes if largest <= np.iinfo(t).max), dtypes[-1]))


def blocks(n: int, size: int = BLOCK) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


# --------------------------------------------------------------------------- the writer


class PartWriter:
    """Writes one part's arrays into `folder`, each fsynced: `pairs` once, `side` once per side."""

    def __init__(self, folder: Path):
        self.folder = folder

    def pairs(self, lines: np.ndarray, corpus: np.ndarray) -> None:
        """Each kept pair's line (1-based) and corpus index."""
        self._save("lines", lines.astype(narrowest("lines", int(lines.max()) if len(lines) else 0)))
        self._save("corpus", corpus.astype(narrowest("corpus", 0), copy=False))

    def side(self, side: str, lengths: np.ndarray, vocab_size: int, ids: Iterable[np.ndarray]) -> int:
        """One side's lengths, offsets and ids (`ids`: the pairs' ids in blocks, in order, below
        `vocab_size`); returns its token count."""
        self._save(f"{side}.lengths", lengths.astype(narrowest(f"{side}.lengths", 0)))
        offsets = np.zeros(len(lengths) + 1, dtype=narrowest(f"{side}.offsets", 0))
        np.cumsum(lengths, out=offsets[1:])
        self._save(f"{side}.offsets", offsets)
        path = self.folder / array_file(f"{side}.ids")
        out = np.lib.format.open_memmap(path, mode="w+", dtype=narrowest(f"{side}.ids", vocab_size - 1),
                                        shape=(int(offsets[-1]),))
        written = 0
        for block in ids:
            out[written:written + len(block)] = block
            written += len(block)
        out.flush()
        del out
        _fsync(path)
        return int(offsets[-1])

    def files(self) -> dict[str, dict]:
        """The manifest's entries of the part's arrays: `partNNN/name.npy` -> bytes, sha256."""
        found = {}
        for name in map(array_file, ARRAYS):
            path = self.folder / name
            found[f"{self.folder.name}/{name}"] = {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
        return found

    def _save(self, name: str, array: np.ndarray) -> None:
        path = self.folder / array_file(name)
        np.save(path, array)
        _fsync(path)


def _fsync(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def write_manifest(folder: Path, *, key: str, settings: dict, versions: dict, inputs: list[dict], counts: dict,
                   sides: dict, ranks: int, part_files: list[dict], prepared: dict) -> dict:
    """Write `folder`'s manifest: the given fields, its parts and every file's size and sha256 (the
    pipeline's, found in `folder`, then `part_files`: PartWriter.files of each part); returns it."""
    files = {}
    for name in [*sorted(p.name for p in folder.glob("*.model")), *PIPELINE_FILES]:
        path = folder / name
        files[name] = {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
    for found in part_files:
        files.update(found)
    manifest = {"format": FORMAT, "key": key, "settings": settings, "versions": versions, "inputs": inputs,
                "counts": counts, "sides": sides, "parts": [part_name(r) for r in range(ranks)], "files": files,
                "prepared": prepared}
    write_json(folder / MANIFEST, manifest)
    return manifest


# --------------------------------------------------------------------------- the reader


def read_manifest(folder: Path) -> dict:
    """The manifest of a prepared folder, checked for its format and shape.

    Raises:
        DataError: missing, not JSON, another format, or missing keys; names the file.
    """
    path = folder / MANIFEST
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: not found (is {folder} a prepared data folder?)") from None
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read ({err})") from None
    try:
        manifest = load_json(text, source=str(path))
    except AttnmtError as err:
        raise DataError(str(err)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise DataError(f"{path}: format {found!r}, expected {FORMAT} (prepared by another attnmt version: "
                        f"prepare it again)")
    problem = _manifest_problem(manifest)
    if problem:
        raise DataError(f"{path}: {problem}")
    return manifest


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _manifest_problem(m: dict) -> str | None:
    """What is wrong with a manifest's shape (the parts of it attnmt reads), or None."""
    for key, kind in (("files", dict), ("parts", list), ("counts", dict), ("settings", dict), ("key", str),
                      ("inputs", list), ("sides", dict)):
        if not isinstance(m.get(key), kind):
            return f"'{key}' is missing or not a JSON {kind.__name__}"
    parts = m["parts"]
    if not parts or len(set(map(str, parts))) != len(parts) or \
            not all(map(is_part_name, parts)):
        return (f"'parts' must list distinct part folders ({part_name(0)}, {part_name(1)}, ...), "
                f"found {parts!r:.80}")
    missing = [f"{n}/{array_file(a)}" for n in parts for a in ARRAYS if f"{n}/{array_file(a)}" not in m["files"]]
    if missing:
        return f"'files' does not name {missing[0]}"
    if not (_is_count(m["settings"].get("max_len")) and m["settings"]["max_len"] > 0):
        return f"settings.max_len must be a positive integer, found {m['settings'].get('max_len')!r:.40}"
    counts = m["counts"]
    if not (_is_count(counts.get("read")) and _is_count(counts.get("kept")) and isinstance(counts.get("dropped"), dict)
            and all(isinstance(k, str) and _is_count(v) for k, v in counts["dropped"].items())):
        return "'counts' must hold read, kept (counts) and dropped (filter -> count)"
    for side in SIDES:
        found = m["sides"].get(side)
        if not (isinstance(found, dict) and all(_is_count(found.get(k)) for k in ("tokens", "types", "unk"))):
            return f"sides.{side} must hold tokens, types and unk counts"
    for entry in m["inputs"]:
        if not (isinstance(entry, dict) and isinstance(entry.get("files"), list) and entry["files"]
                and all(isinstance(f, str) for f in entry["files"]) and _is_count(entry.get("pairs"))):
            return "'inputs' must be a list of {files: [paths], pairs: count}"
    return None


@dataclass
class Part:
    """One part's arrays (memory maps)."""

    arrays: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.arrays["lines"])


class PreparedData:
    """A prepared folder opened for training: its pipeline, manifest and the pairs of all parts.

    Attributes:
        folder, manifest, pipeline: what was opened.
        src_lengths, tgt_lengths: (pairs,) uint16, every pair's token counts (all parts, in order).
        corpus_of: (pairs,) uint8, the corpus of every pair.
    """

    def __init__(self, folder: Path, manifest: dict, pipeline: TextPipeline, parts: list[Part]):
        self.folder, self.manifest, self.pipeline, self.parts = folder, manifest, pipeline, parts
        self.starts = np.cumsum([0] + [len(p) for p in parts])  # (parts + 1,) first pair of each part
        one = len(parts) == 1
        self.src_lengths = parts[0].arrays["src.lengths"] if one else np.concatenate([p.arrays["src.lengths"] for p in parts])
        self.tgt_lengths = parts[0].arrays["tgt.lengths"] if one else np.concatenate([p.arrays["tgt.lengths"] for p in parts])
        self.corpus_of = parts[0].arrays["corpus"] if one else np.concatenate([p.arrays["corpus"] for p in parts])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __repr__(self) -> str:
        return f"PreparedData({str(self.folder)!r}, {len(self)} pairs)"

    @property
    def key(self) -> str:
        return self.manifest["key"]

    @classmethod
    def open(cls, folder: str | Path, *, verify: bool = True) -> PreparedData:
        """Open a prepared folder; with `verify`, check every file first (see the module docstring).

        Raises:
            DataError: a missing, changed or inconsistent file; names it.
        """
        folder = Path(folder)
        manifest = read_manifest(folder)
        if verify:
            _verify_digests(folder, manifest)
        pipeline = TextPipeline.load(folder)
        parts = [Part(_open_arrays(folder / name, manifest)) for name in manifest["parts"]]
        data = cls(folder, manifest, pipeline, parts)
        if verify:
            data._check_structure()
        return data

    # ---- reading pairs

    def locate(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(part, row in the part) of each pair of `index`."""
        part = np.searchsorted(self.starts, index, side="right") - 1
        return part, index - self.starts[part]

    def ids(self, side: str, index: np.ndarray) -> list[np.ndarray]:
        """The token ids of `side` ("src" or "tgt") of each pair of `index`, as int64 arrays.

        Raises:
            DataError: a file was cut while open (`check_unchanged`).
        """
        self.check_unchanged()
        part, row = self.locate(np.asarray(index, dtype=np.int64))
        out = []
        for p, r in zip(part.tolist(), row.tolist()):
            arrays = self.parts[p].arrays
            offsets = arrays[f"{side}.offsets"]
            out.append(arrays[f"{side}.ids"][offsets[r]:offsets[r + 1]].astype(np.int64))
        return out

    def origin(self, index: int) -> str:
        """Where pair `index` came from, for messages: `files:line`."""
        part, row = self.locate(np.asarray([index]))
        arrays = self.parts[int(part[0])].arrays
        inputs, corpus = self.manifest["inputs"], int(arrays["corpus"][row[0]])
        files = " + ".join(inputs[corpus]["files"]) if corpus < len(inputs) else f"corpus {corpus}"
        return f"{files}:{int(arrays['lines'][row[0]])}"

    # ---- checks

    def check_unchanged(self) -> None:
        """Every array's file still as long as its map (an fstat each): reading a map past the end
        of a file cut under it would kill the process with SIGBUS and no word. Called before every
        read of the maps (`ids`, `epochs.Epoch`'s windows and updates).

        Raises:
            DataError: names the file that was cut, and both sizes.
        """
        for name, part in zip(self.manifest["parts"], self.parts):
            for array, values in part.arrays.items():
                mapped = getattr(values, "_mmap", None)  # np.memmap's mmap.mmap; None for an empty array
                if mapped is None:
                    continue
                try:
                    size = mapped.size()  # the file's size now (fstat of the map's own descriptor)
                except (OSError, ValueError):
                    continue
                needed = values.offset + values.nbytes
                if size < needed:
                    raise DataError(f"{self.folder / name / array_file(array)}: cut to {size} bytes while in use "
                                    f"({needed} when it was opened): the prepared data changed under this process; "
                                    f"it stops here (its last saved state is kept)")

    def _check_structure(self) -> None:
        vocab = {"src": len(self.pipeline.src_vocab), "tgt": len(self.pipeline.tgt_vocab)}
        max_len = self.manifest["settings"].get("max_len")
        for name, part in zip(self.manifest["parts"], self.parts):
            for side in SIDES:
                _check_side(self.folder / name, side, part.arrays, vocab[side], max_len)


def _open_arrays(folder: Path, manifest: dict) -> dict[str, np.ndarray]:
    arrays = {}
    for name in ARRAYS:
        path = folder / array_file(name)
        try:
            arrays[name] = np.load(path, mmap_mode="r", allow_pickle=False)
        except FileNotFoundError:
            raise DataError(f"{path}: missing (named in {folder.parent / MANIFEST})") from None
        except Exception as err:  # numpy's header parser raises a zoo of types on a damaged header
            raise DataError(f"{path}: not a readable .npy array ({type(err).__name__}: {err})") from None
        if arrays[name].ndim != 1:
            raise DataError(f"{path}: expected a 1-d array, found shape {arrays[name].shape}")
    pairs = len(arrays["lines"])
    for name in (a.name for a in LAYOUT if a.per == "pairs" and a.name != "lines"):
        if len(arrays[name]) != pairs:
            raise DataError(f"{folder / array_file(name)}: {len(arrays[name])} entries for {pairs} pairs")
    return arrays


def _verify_digests(folder: Path, manifest: dict) -> None:
    """Every file the manifest names: present, of its size and sha256 (hashed on two threads)."""
    files = manifest["files"]
    for name, info in files.items():
        path = folder / name
        if not isinstance(info, dict) or not isinstance(info.get("sha256"), str):
            raise DataError(f"{folder / MANIFEST}: files.{name} must be an object with a sha256")
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise DataError(f"{folder / MANIFEST}: names {name!r}, outside {folder}")
        if not path.is_file():
            raise DataError(f"{path}: missing (named in {folder / MANIFEST})")
        if path.stat().st_size != info.get("bytes"):
            raise DataError(f"{path}: {path.stat().st_size} bytes, {info.get('bytes')} when it was prepared: "
                            f"the file was cut or changed")
    with ThreadPoolExecutor(2) as pool:  # hashlib releases the GIL
        digests = dict(zip(files, pool.map(lambda name: sha256_file(folder / name), files)))
    for name, info in files.items():
        if digests[name] != info["sha256"]:
            raise DataError(f"{folder / name}: sha256 {digests[name][:16]}..., not the {info['sha256'][:16]}... it "
                            f"had when it was prepared: the file is damaged or was changed")


def _check_side(folder: Path, side: str, arrays: dict[str, np.ndarray], vocab_size: int, max_len: int | None) -> None:
    """Offsets that start at 0, step by the lengths and end at the ids' end; ids below the
    vocabulary size; lengths within max_len (in blocks, so memory stays bounded)."""
    ids, offsets, lengths = arrays[f"{side}.ids"], arrays[f"{side}.offsets"], arrays[f"{side}.lengths"]
    ids_file, offsets_file, lengths_file = (folder / array_file(f"{side}.{a}") for a in ("ids", "offsets", "lengths"))
    if len(offsets) != len(lengths) + 1 or offsets[0] != 0 or offsets[-1] != len(ids):
        raise DataError(f"{offsets_file}: does not span {ids_file} ({len(offsets)} offsets, {len(ids)} ids)")
    for block in blocks(len(lengths)):
        steps = np.diff(offsets[block.start:block.stop + 1])
        if not np.array_equal(steps, lengths[block]):
            raise DataError(f"{offsets_file}: offsets and {lengths_file.name} disagree near pair {block.start}")
        if max_len is not None and len(steps) and (int(steps.max()) > max_len or int(steps.min()) < 1):
            raise DataError(f"{lengths_file}: a pair near {block.start} has a length outside 1..{max_len}")
    for block in blocks(len(ids), 1 << 24):
        if len(ids[block]) and int(ids[block].max()) >= vocab_size:
            raise DataError(f"{ids_file}: an id near token {block.start} is not below the vocabulary "
                            f"size {vocab_size}")
