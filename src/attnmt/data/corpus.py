"""Parallel corpora: Multi30k task 1 (verified, cached download) or the user's own files.

Every reader returns a `ParallelCorpus` of raw, untokenized sentence pairs. Input is validated
with messages that name the file and line: different line counts, invalid UTF-8 and NUL bytes
are errors (`DataError`); pairs with an empty or whitespace-only side are skipped and counted in
one warning; Windows line endings (`\\r\\n`) are accepted.

Multi30k files come from `ATTNMT_DATA=<folder>` when it is set (nothing is downloaded), else
from the cache (`ATTNMT_CACHE`, else `$XDG_CACHE_HOME/attnmt`, else `~/.cache/attnmt`), else
they are downloaded with urllib from `MULTI30K_URL` (override: `ATTNMT_MULTI30K_URL`), checked
against `MULTI30K_SHA256` and moved into the cache atomically.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import logging
import os
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path
from itertools import islice
from typing import IO, Any, Iterator

from attnmt.bounds import CORPUS_LINE_BYTES
from attnmt.direction import Direction
from attnmt.direction import names as direction_names
from attnmt.errors import DataError
from attnmt.files import atomic_write, sha256_file
from attnmt.untrusted import bounded_lines, open_regular_binary

logger = logging.getLogger(__name__)

MULTI30K_LANGS = ("de", "en", "fr", "cs")
MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
DOWNLOAD_TIMEOUT_S = 60.0

# split -> languages the official repository has for it.
MULTI30K_SPLITS: dict[str, tuple[str, ...]] = {
    "train": MULTI30K_LANGS,
    "val": MULTI30K_LANGS,
    "test_2016_flickr": MULTI30K_LANGS,
    "test_2017_flickr": MULTI30K_LANGS,
    "test_2017_mscoco": ("de", "en", "fr"),
    "test_2018_flickr": MULTI30K_LANGS,
}
SPLIT_ALIASES = {"valid": "val", "dev": "val", "test": "test_2016_flickr"}

# sha256 of the official `<split>.<lang>.gz` files; other splits download unverified.
MULTI30K_SHA256 = {
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
}

# sha256 of the same files uncompressed (`gunzip -c <split>.<lang>.gz | sha256sum`), so that an
# unzipped `<split>.<lang>` under ATTNMT_DATA is verified too.
MULTI30K_SHA256_PLAIN = {
    "test_2016_flickr.cs": "45adb85f688de8407fddcbe1b36dca15d12aab868149b337e2576f2d6d2ff8d8",
    "test_2016_flickr.de": "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16",
    "test_2016_flickr.en": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182",
    "test_2016_flickr.fr": "cb3160d69b002bb638e66cc7612fcd56cb0af82eadc9c142dedc438afb885ef6",
    "train.cs": "2be68b38c8d586ff4f54eb13cc6e1baaaa053695b3f070d3038303a47f2268da",
    "train.de": "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72",
    "train.en": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
    "train.fr": "5925a3c18f1587b6b54b87743106e6e8ab93618edb6f65d19eac0621f853a10d",
    "val.cs": "d53827e469b0a1ca8d57e9e26b2b64c4bc4b33f5479c7b03ae87ae5c882c3e33",
    "val.de": "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660",
    "val.en": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
    "val.fr": "5304e444d842e962b2dda4d816b70b22a1765b15401642b7ca37a67477e708dc",
}


@dataclass
class ParallelCorpus:
    """Aligned raw sentence pairs: `src[i]` translates to `tgt[i]`."""

    src: list[str]
    tgt: list[str]
    name: str

    def __len__(self) -> int:
        return len(self.src)


@dataclass(frozen=True)
class CorpusSpec:
    """Which corpus to read. `load_corpus` also accepts any object with these attributes.

    Args:
        name: "multi30k", or anything else for the user's own files below.
        src_lang: source language code (also the file suffix of own text files).
        tgt_lang: target language code.
        train, valid, test: own data only: a path prefix (`data/train` reads `data/train.<src_lang>`
            and `data/train.<tgt_lang>`, each plain or `.gz`) or a `.tsv` file (source TAB target).
    """

    name: str = "multi30k"
    src_lang: str = "de"
    tgt_lang: str = "en"
    train: str | None = None
    valid: str | None = None
    test: str | None = None


def corpus_spec(data_cfg) -> CorpusSpec:
    """The CorpusSpec that a config's `data` section names."""
    return CorpusSpec(name=data_cfg.corpus, src_lang=data_cfg.src_lang, tgt_lang=data_cfg.tgt_lang,
                      train=data_cfg.train, valid=data_cfg.valid, test=data_cfg.test)


# --------------------------------------------------------------------------- reading files
# Every reader streams: a corpus is read in chunks of lines, never whole, and each line is
# checked (NUL bytes, UTF-8) where it is decoded, with its file and line in the message.


def _open_binary(path: Path) -> IO[bytes]:
    """`path` opened for reading bytes, gunzipped on the fly when it starts with the gzip magic."""
    try:
        handle = open_regular_binary(path)  # a FIFO or device (/dev/zero) refused at once (issue 66 group C)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a folder, not a text file") from None
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror or err})") from None
    if handle.peek(2)[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=handle, mode="rb")  # closing it does not close `handle`: see _lines
    return handle


def _lines(path: Path, limit: int | None = None) -> Iterator[list[bytes]]:
    """The raw lines of `path` (plain or gzip, split at b"\\n" only), in lists of `CHUNK_LINES`; a line
    past bounds.CORPUS_LINE_BYTES is refused naming file:line (a file with no line breaks, /dev/zero:
    never held whole); shorter long lines are read and dropped by data.max_len, and counted."""
    handle = _open_binary(path)
    raw = getattr(handle, "fileobj", None)
    source = bounded_lines(handle, str(path), CORPUS_LINE_BYTES)
    try:
        while True:
            try:
                lines = list(islice(source, CHUNK_LINES))
            except (OSError, EOFError, zlib.error) as err:
                raise DataError(f"{path}: corrupt or truncated gzip file ({err})") from None
            if not lines:
                return
            yield lines
    finally:
        handle.close()
        if raw is not None:
            raw.close()


CHUNK_LINES = 10_000  # lines read at a time


def decode_line(raw: bytes, path: str | os.PathLike, number: int, *, strip: bool = True) -> str:
    """One line of a text file as a str without its `\\n` or `\\r\\n` (and with `strip`, without
    surrounding white space); a BOM on line 1 dropped.

    Raises:
        DataError: `file:line: NUL byte` or `file:line: invalid UTF-8`.
    """
    if b"\x00" in raw:
        raise DataError(f"{path}:{number}: NUL byte (is this a binary file?)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{path}:{number}: invalid UTF-8 ({err.reason} at byte {err.start} of the line)") from None
    if number == 1:
        text = text.removeprefix("\ufeff")
    return text.strip() if strip else text.rstrip("\r\n")


def read_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a UTF-8 text file (plain or gzip), stripped.

    Raises:
        DataError: missing file, `file:line: NUL byte`, `file:line: invalid UTF-8`.
    """
    lines, number = [], 0
    for chunk in _lines(Path(path)):
        for raw in chunk:
            number += 1
            lines.append(decode_line(raw, path, number))
    return lines


@dataclass(frozen=True)
class CorpusFiles:
    """The files of one corpus: two aligned text files (`src`, `tgt`), or one TSV file (`src` only);
    for a multilingual model, the direction they hold and which of data.train's corpora they are."""

    src: Path
    tgt: Path | None = None
    direction: Direction | None = None
    corpus: int = 0

    @property
    def name(self) -> str:
        return str(self.src) if self.tgt is None else f"{self.src} + {self.tgt}"

    @property
    def paths(self) -> tuple[Path, ...]:
        return (self.src,) if self.tgt is None else (self.src, self.tgt)


@dataclass
class RawChunk:
    """Consecutive raw lines of one corpus: pairs `first_line`, `first_line + 1`, ...; `tgt` is
    None for a TSV file (each line holds both sides)."""

    files: CorpusFiles
    first_line: int
    src: list[bytes]
    tgt: list[bytes] | None

    def __len__(self) -> int:
        return len(self.src)

    def pair(self, i: int) -> tuple[int, str, str]:
        """(line, source, target) of the chunk's `i`-th line, decoded and checked; a TSV line
        with both sides empty is ("", "").

        Raises:
            DataError: bad bytes (file:line), or a TSV line without exactly 2 columns.
        """
        files, number = self.files, self.first_line + i
        if self.tgt is not None:
            return number, decode_line(self.src[i], files.src, number), decode_line(self.tgt[i], files.tgt, number)
        line = decode_line(self.src[i], files.src, number, strip=False)
        if not line.strip():
            return number, "", ""
        columns = line.split("\t")
        if len(columns) != 2:
            raise DataError(f"{files.src}:{number}: expected 2 tab-separated columns, found {len(columns)}")
        return number, columns[0].strip(), columns[1].strip()

    def pairs(self) -> Iterator[tuple[int, str, str]]:
        """`pair(i)` of every line, in order."""
        return map(self.pair, range(len(self.src)))


def read_chunks(files: CorpusFiles) -> Iterator[RawChunk]:
    """Stream a corpus in chunks of raw lines (decoded later, by whoever processes the chunk).

    Raises:
        DataError: a missing or unreadable file, or two files of different line counts (naming both).
    """
    if files.tgt is None:
        number = 1
        for lines in _lines(files.src):
            yield RawChunk(files, number, lines, None)
            number += len(lines)
        return
    number = 1
    src_chunks, tgt_chunks = _lines(files.src), _lines(files.tgt)
    for src in src_chunks:
        tgt = next(tgt_chunks, [])
        if len(tgt) != len(src):  # one file ended first: count both to the end for the message
            n_src = number - 1 + len(src) + sum(len(c) for c in src_chunks)
            n_tgt = number - 1 + len(tgt) + sum(len(c) for c in tgt_chunks)
            raise _count_mismatch(files, n_src, n_tgt)
        yield RawChunk(files, number, src, tgt)
        number += len(src)
    rest = sum(len(c) for c in tgt_chunks)
    if rest:
        raise _count_mismatch(files, number - 1, number - 1 + rest)


def _count_mismatch(files: CorpusFiles, n_src: int, n_tgt: int) -> DataError:
    return DataError(f"{files.src} has {n_src} lines, {files.tgt} has {n_tgt}; "
                     "parallel files must have one line per sentence pair")


def _read_corpus(files: CorpusFiles) -> ParallelCorpus:
    """All pairs of a (small) corpus in memory; pairs with an empty side are skipped and counted
    in one warning."""
    src, tgt, skipped, first = [], [], 0, None
    for chunk in read_chunks(files):
        for number, s, t in chunk.pairs():
            if s and t:
                src.append(s)
                tgt.append(t)
            else:
                skipped += 1
                first = first or number
    if skipped:
        logger.warning("%s: skipped %d pair(s) with an empty source or target line (first at line %d)",
                       files.name, skipped, first)
    return ParallelCorpus(src, tgt, files.name)


def read_parallel(src_path: str | os.PathLike, tgt_path: str | os.PathLike) -> ParallelCorpus:
    """Read two aligned text files (plain or .gz), line i of one translating line i of the other.

    Raises:
        DataError: different line counts (naming both files and counts), bad bytes (file:line).
    """
    return _read_corpus(CorpusFiles(Path(src_path), Path(tgt_path)))


def read_tsv(path: str | os.PathLike) -> ParallelCorpus:
    """Read a TSV file (plain or .gz) with one `source<TAB>target` pair a line.

    Raises:
        DataError: `file:line: expected 2 tab-separated columns, found N`, or bad bytes.
    """
    return _read_corpus(CorpusFiles(Path(path)))


# --------------------------------------------------------------------------- Multi30k


def cache_dir() -> Path:
    """The user cache: `$ATTNMT_CACHE`, else `$XDG_CACHE_HOME/attnmt`, else `~/.cache/attnmt`."""
    if os.environ.get("ATTNMT_CACHE"):
        return Path(os.environ["ATTNMT_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "attnmt"


def _offline_hint(filename: str) -> str:
    return (f"If you are offline, get the Multi30k task 1 files elsewhere and point attnmt at them: "
            f"export ATTNMT_DATA=/path/to/folder/with/{filename} (files named <split>.<lang>.gz, "
            f"e.g. train.de.gz, val.de.gz, test_2016_flickr.de.gz)")


def _download(url: str, dest: Path, sha256: str | None) -> None:
    """Download `url` to `dest` atomically (files.atomic_write): verified before it is renamed
    into place, so a partial or corrupt download never appears under `dest`."""

    def fetch(tmp: Path) -> None:
        digest, size = hashlib.sha256(), 0
        with open(tmp, "wb") as f:
            try:
                with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
                    expected = response.headers.get("Content-Length")
                    for chunk in iter(lambda: response.read(1 << 16), b""):
                        f.write(chunk)
                        digest.update(chunk)
                        size += len(chunk)
            except urllib.error.HTTPError as err:
                raise DataError(f"could not download {url}: HTTP {err.code} {err.reason}. "
                                + _offline_hint(dest.name)) from None
            except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
                reason = getattr(err, "reason", None) or err
                raise DataError(f"could not download {url}: {reason}. " + _offline_hint(dest.name)) from None
        if expected is not None and size != int(expected):
            raise DataError(f"could not download {url}: transfer cut short after {size} of "
                            f"{expected} bytes; try again. " + _offline_hint(dest.name))
        if sha256 is not None and digest.hexdigest() != sha256:
            raise DataError(f"checksum mismatch for {url}: sha256 {digest.hexdigest()}, expected {sha256}; "
                            "the file was not cached")
        if sha256 is None:
            for _ in _lines(tmp):  # unverified: at least make sure the gzip stream is complete
                pass

    atomic_write(dest, fetch)


def _check_split_lang(split: str, lang: str) -> str:
    split = SPLIT_ALIASES.get(split, split)
    if split not in MULTI30K_SPLITS:
        raise DataError(f"unknown Multi30k split {split!r}; choose from {', '.join(MULTI30K_SPLITS)}")
    if lang not in MULTI30K_SPLITS[split]:
        raise DataError(f"Multi30k {split} has no language {lang!r}; it has "
                        f"{', '.join(MULTI30K_SPLITS[split])}")
    return split


def _verify_local(path: Path, expected: str | None) -> None:
    """Check a file under ATTNMT_DATA against its known sha256, or warn that it cannot be checked.

    Raises:
        DataError: the checksum differs.
    """
    if expected is None:
        logger.warning("%s has no known checksum: using it unverified", path)
        return
    if (actual := sha256_file(path)) != expected:
        raise DataError(f"{path}: sha256 {actual}, expected {expected}; "
                        "is this the Multi30k task 1 raw file?")


def multi30k_path(split: str, lang: str) -> Path:
    """Local path of the Multi30k task 1 file `<split>.<lang>.gz`, downloading it if needed.

    Reads from `$ATTNMT_DATA` when set (never downloads then), else the verified cache. Under
    ATTNMT_DATA an unzipped `<split>.<lang>` is used when the `.gz` is missing; either is checked
    against its sha256 (`MULTI30K_SHA256`, `MULTI30K_SHA256_PLAIN`), and a file of a split with
    no known checksum is used with a warning.

    Raises:
        DataError: unknown split/language, missing file, checksum mismatch, failed download.
    """
    split = _check_split_lang(split, lang)
    filename = f"{split}.{lang}.gz"
    expected = MULTI30K_SHA256.get(filename)
    data_dir = os.environ.get("ATTNMT_DATA")
    if data_dir:
        path = Path(data_dir).expanduser() / filename
        if not path.is_file():
            plain = path.with_suffix("")
            if plain.is_file():  # an unzipped copy: verified against the uncompressed checksum
                _verify_local(plain, MULTI30K_SHA256_PLAIN.get(plain.name))
                return plain
            raise DataError(f"{path}: file not found (ATTNMT_DATA={data_dir} is set, so nothing is "
                            f"downloaded; put {filename} there or unset ATTNMT_DATA)")
        _verify_local(path, expected)
        return path

    path = cache_dir() / "multi30k" / filename
    if path.is_file():
        if expected is None or sha256_file(path) == expected:
            return path
        logger.warning("%s: cached file fails its checksum; downloading it again", path)
    base = os.environ.get("ATTNMT_MULTI30K_URL") or MULTI30K_URL
    url = f"{base.rstrip('/')}/{filename}"
    if expected is None:
        logger.warning("%s has no known checksum: downloading it unverified", url)
    logger.info("downloading %s -> %s", url, path)
    _download(url, path, expected)
    return path


def load_multi30k(split: str, src_lang: str, tgt_lang: str) -> ParallelCorpus:
    """Sentence pairs of one Multi30k task 1 split (`train`, `val`, `test_2016_flickr`, ...)."""
    if src_lang == tgt_lang:
        raise DataError(f"source and target language are both {src_lang!r}")
    corpus = read_parallel(multi30k_path(split, src_lang), multi30k_path(split, tgt_lang))
    corpus.name = f"multi30k/{SPLIT_ALIASES.get(split, split)}.{Direction(src_lang, tgt_lang)}"
    return corpus


# --------------------------------------------------------------------------- config entry points


def corpus_files(spec: str, src_lang: str, tgt_lang: str) -> CorpusFiles:
    """The files of own data given as a `.tsv` file or a prefix of `<prefix>.<lang>[.gz]` files.

    Raises:
        DataError: the files are not there; names what was looked for.
    """
    if spec.endswith((".tsv", ".tsv.gz")):
        if Path(spec).is_dir():
            raise DataError(f"{spec}: is a folder, not a .tsv file")
        if not Path(spec).is_file():
            raise DataError(f"{spec}: file not found")
        return CorpusFiles(Path(spec))
    paths = []
    for lang in (src_lang, tgt_lang):
        candidates = [Path(f"{spec}.{lang}"), Path(f"{spec}.{lang}.gz")]
        found = next((p for p in candidates if p.is_file()), None)
        if found is None:
            folder = next((p for p in candidates if p.is_dir()), None)
            if folder is not None:
                raise DataError(f"{folder}: is a folder, not a text file")
            if Path(spec).is_dir():  # a folder named where a prefix of files is expected
                raise DataError(f"{spec}: is a folder; name a corpus by the prefix of its files "
                                f"(<prefix>.{src_lang} and <prefix>.{tgt_lang}, plain or .gz) or by a .tsv file, "
                                f"e.g. {Path(spec) / 'train'}")
            raise DataError(f"{candidates[0]}: file not found (nor {candidates[1].name})")
        paths.append(found)
    return CorpusFiles(*paths)


def _direction_files(spec: str, direction: Direction, corpus: int) -> CorpusFiles:
    found = corpus_files(spec, *direction)
    return CorpusFiles(found.src, found.tgt, direction, corpus)


def train_files(data_cfg: Any) -> list[CorpusFiles]:
    """The training corpora a config names, in order: Multi30k's train files (verified), or each
    of `data.train`'s own corpora. A multilingual config has one entry per corpus and direction:
    Multi30k's are the train files of each direction's two languages; an own corpus is a
    `pair`'s files, or a multiway prefix (`data/train` for data/train.de, .en, .fr) that gives
    every direction whose two files exist.

    Raises:
        DataError: a file is missing or fails its checksum, or a multiway corpus has no direction's files.
    """
    directions = data_cfg.directions()
    multi = data_cfg.multilingual
    if data_cfg.corpus == "multi30k":
        return [CorpusFiles(multi30k_path("train", d.source), multi30k_path("train", d.target), d if multi else None)
                for d in directions]
    files = []
    for index, c in enumerate(data_cfg.train_corpora()):
        path = str(c.path)
        if not multi:
            files.append(corpus_files(path, *directions[0]))
        elif c.pair is not None:
            files.append(_direction_files(path, Direction.parse(c.pair, f"data.train[{index}].pair", error=DataError), index))
        elif path.endswith((".tsv", ".tsv.gz")):
            raise DataError(f"{path}: a .tsv file holds one direction: name it with data.train[{index}].pair")
        else:
            found = [_direction_files(path, d, index) for d in directions
                     if all(any(Path(f"{path}.{lang}{gz}").is_file() for gz in ("", ".gz")) for lang in d)]
            if not found:
                raise DataError(f"{path}: no files of any direction ({direction_names(directions)}): "
                                f"expected {path}.<lang> (or .gz) for both languages of one at least")
            files += found
    return files


def load_corpus(data_cfg: Any, split: str, direction: tuple[str, str] | None = None) -> ParallelCorpus:
    """Sentence pairs of `split` for a `CorpusSpec` (or a config with the same attributes).

    Args:
        data_cfg: has `src_lang`, `tgt_lang`, the corpus name as `name` or `corpus`, and for own
            data `train`, `valid` (or `val`) and `test` paths.
        split: "train", "val"/"valid", "test", or a Multi30k split name like "test_2017_flickr".
        direction: (source, target) languages instead of data_cfg's (a multilingual model's
            directions: Multi30k's files of those languages, or own multiway files prefix.<lang>).
    """
    name = getattr(data_cfg, "corpus", None) or getattr(data_cfg, "name", "multi30k")
    src_lang, tgt_lang = direction or (data_cfg.src_lang, data_cfg.tgt_lang)
    if name == "multi30k":
        return load_multi30k(split, src_lang, tgt_lang)
    # test_2016_flickr is the CLI's default test split: for own data it means the test files.
    field = {"val": "valid", "dev": "valid", "test_2016_flickr": "test"}.get(split, split)
    if field not in ("train", "valid", "test"):
        raise DataError(f"unknown split {split!r} for own data; use train, valid or test")
    spec = getattr(data_cfg, field, None) or (getattr(data_cfg, "val", None) if field == "valid" else None)
    if not spec:
        raise DataError(f"no {field} files configured for corpus {name!r} (data.{field})")
    if not isinstance(spec, str):  # several training corpora: read one after the other
        parts = [_read_corpus(corpus_files(str(c.path), src_lang, tgt_lang)) for c in spec]
        return ParallelCorpus([s for p in parts for s in p.src], [t for p in parts for t in p.tgt],
                              " + ".join(p.name for p in parts))
    return _read_corpus(corpus_files(spec, src_lang, tgt_lang))
