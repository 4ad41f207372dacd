"""Multi30k download, cache and ATTNMT_DATA, against a local HTTP server."""

from __future__ import annotations

import gzip
import hashlib
import logging
import socket
from pathlib import Path

import pytest

from attnmt.data import corpus
from attnmt.data.corpus import cache_dir, load_multi30k, multi30k_path
from attnmt.errors import AttnmtError, DataError

VERIFIED = [f"{split}.{lang}" for split in ("train", "val", "test_2016_flickr") for lang in ("de", "en", "fr", "cs")]


def gz(lines: list[str]) -> bytes:
    return gzip.compress("".join(line + "\n" for line in lines).encode("utf-8"), mtime=0)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def val_files(monkeypatch):
    """Fake val.de.gz / val.en.gz whose checksums the module knows."""
    files = {"de": gz(["Ein Hund läuft.", "Zwei Katzen."]), "en": gz(["A dog runs.", "Two cats."])}
    for lang, data in files.items():
        monkeypatch.setitem(corpus.MULTI30K_SHA256, f"val.{lang}.gz", sha(data))
    return files


def cached_files(cache: Path) -> list[str]:
    folder = cache / "multi30k"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_download_verifies_caches_and_second_call_makes_no_request(file_server, val_files, monkeypatch,
                                                                   isolated_env):
    file_server.files.update({f"/raw/val.{lang}.gz": data for lang, data in val_files.items()})
    monkeypatch.setenv("ATTNMT_MULTI30K_URL", file_server.url)
    pairs = load_multi30k("val", "de", "en")
    assert pairs.src == ["Ein Hund läuft.", "Zwei Katzen."]
    assert pairs.tgt == ["A dog runs.", "Two cats."]
    assert file_server.requests == ["/raw/val.de.gz", "/raw/val.en.gz"]
    assert cached_files(isolated_env) == ["val.de.gz", "val.en.gz"]
    assert (isolated_env / "multi30k" / "val.de.gz").read_bytes() == val_files["de"]

    again = load_multi30k("valid", "de", "en")  # alias, from the cache
    assert again.src == pairs.src
    assert len(file_server.requests) == 2


def test_module_constant_url_is_used_without_env(file_server, val_files, monkeypatch):
    file_server.files["/raw/val.de.gz"] = val_files["de"]
    monkeypatch.setattr(corpus, "MULTI30K_URL", file_server.url)
    assert multi30k_path("val", "de").read_bytes() == val_files["de"]


def test_checksum_mismatch_is_rejected_and_not_cached(file_server, val_files, monkeypatch, isolated_env):
    file_server.files["/raw/val.de.gz"] = gz(["tampered"])
    monkeypatch.setenv("ATTNMT_MULTI30K_URL", file_server.url)
    with pytest.raises(DataError, match=r"checksum mismatch for .*val\.de\.gz.*not cached"):
        multi30k_path("val", "de")
    assert cached_files(isolated_env) == []  # no partial or temp file either


def test_http_404_names_url_and_ATTNMT_DATA(file_server, monkeypatch, isolated_env):
    monkeypatch.setenv("ATTNMT_MULTI30K_URL", file_server.url)
    with pytest.raises(DataError, match=r"HTTP 404.*export ATTNMT_DATA="):
        multi30k_path("val", "de")
    assert cached_files(isolated_env) == []


def test_transfer_cut_short_is_not_cached(file_server, val_files, monkeypatch, isolated_env):
    file_server.files["/raw/val.de.gz"] = val_files["de"]
    file_server.short.add("/raw/val.de.gz")
    monkeypatch.setenv("ATTNMT_MULTI30K_URL", file_server.url)
    with pytest.raises(DataError, match="could not download"):
        multi30k_path("val", "de")
    assert cached_files(isolated_env) == []
    file_server.short.clear()  # the next try succeeds
    assert multi30k_path("val", "de").read_bytes() == val_files["de"]


def test_offline_error_says_how_to_set_ATTNMT_DATA(monkeypatch):
    with socket.socket() as s:  # a port with nothing listening: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("ATTNMT_MULTI30K_URL", f"http://127.0.0.1:{port}/raw")
    with pytest.raises(AttnmtError, match=r"export ATTNMT_DATA=/path/to/folder/with/train\.de\.gz"):
        multi30k_path("train", "de")


def test_unverified_split_downloads_with_warning(file_server, monkeypatch, caplog):
    file_server.files["/raw/test_2017_mscoco.fr.gz"] = gz(["Un chat."])
    monkeypatch.setenv("ATTNMT_MULTI30K_URL", file_server.url)
    with caplog.at_level(logging.WARNING, logger="attnmt.data.corpus"):
        path = multi30k_path("test_2017_mscoco", "fr")
    assert "unverified" in caplog.text
    assert path.name == "test_2017_mscoco.fr.gz"


def test_unverified_truncated_gzip_is_not_cached(file_server, monkeypatch, isolated_env):
    file_server.files["/raw/test_2018_flickr.cs.gz"] = gz(["Kočka."] * 50)[:-10]
    monkeypatch.setenv("ATTNMT_MULTI30K_URL", file_server.url)
    with pytest.raises(DataError, match="corrupt or truncated gzip"):
        multi30k_path("test_2018_flickr", "cs")
    assert cached_files(isolated_env) == []


def test_corrupt_cache_entry_is_downloaded_again(file_server, val_files, monkeypatch, isolated_env):
    (isolated_env / "multi30k").mkdir(parents=True)
    (isolated_env / "multi30k" / "val.de.gz").write_bytes(b"garbage")
    file_server.files["/raw/val.de.gz"] = val_files["de"]
    monkeypatch.setenv("ATTNMT_MULTI30K_URL", file_server.url)
    assert multi30k_path("val", "de").read_bytes() == val_files["de"]
    assert file_server.requests == ["/raw/val.de.gz"]


def test_ATTNMT_DATA_is_read_and_nothing_downloaded(tmp_path, file_server, val_files, monkeypatch):
    for lang, data in val_files.items():
        (tmp_path / f"val.{lang}.gz").write_bytes(data)
    monkeypatch.setenv("ATTNMT_DATA", str(tmp_path))
    monkeypatch.setenv("ATTNMT_MULTI30K_URL", file_server.url)
    assert load_multi30k("val", "en", "de").src == ["A dog runs.", "Two cats."]
    assert file_server.requests == []


def test_ATTNMT_DATA_missing_file_names_path(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNMT_DATA", str(tmp_path))
    with pytest.raises(DataError, match=rf"{tmp_path}/train\.cs\.gz: file not found.*ATTNMT_DATA"):
        multi30k_path("train", "cs")


def test_ATTNMT_DATA_checksum_is_verified(tmp_path, val_files, monkeypatch):
    (tmp_path / "val.de.gz").write_bytes(gz(["wrong file"]))
    monkeypatch.setenv("ATTNMT_DATA", str(tmp_path))
    with pytest.raises(DataError, match=r"val\.de\.gz: sha256 [0-9a-f]{64}, expected"):
        multi30k_path("val", "de")


@pytest.mark.parametrize(("split", "lang", "message"), [
    ("test_2019", "de", "unknown Multi30k split 'test_2019'"),
    ("test_2017_mscoco", "cs", "Multi30k test_2017_mscoco has no language 'cs'"),
    ("train", "xx", "has no language 'xx'"),
])
def test_unknown_split_or_language(split, lang, message):
    with pytest.raises(DataError, match=message):
        multi30k_path(split, lang)


def test_same_source_and_target_language():
    with pytest.raises(DataError, match="both 'de'"):
        load_multi30k("val", "de", "de")


def test_cache_dir_precedence(monkeypatch, tmp_path):
    assert cache_dir() == tmp_path / "cache"
    monkeypatch.delenv("ATTNMT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "attnmt"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "attnmt"


@pytest.mark.parametrize("name", VERIFIED)
def test_registry_checksums_are_those_of_the_real_files(multi30k_dir, name):
    """The registry's values (not only its keys), for all four languages: sha256 computed here,
    independently, of the shared copy of the official files and of their uncompressed text."""
    data = (multi30k_dir / f"{name}.gz").read_bytes()
    assert corpus.MULTI30K_SHA256[f"{name}.gz"] == hashlib.sha256(data).hexdigest()
    assert corpus.MULTI30K_SHA256_PLAIN[name] == hashlib.sha256(gzip.decompress(data)).hexdigest()


def test_registries_cover_exactly_the_verified_splits():
    assert set(corpus.MULTI30K_SHA256) == {f"{name}.gz" for name in VERIFIED}
    assert set(corpus.MULTI30K_SHA256_PLAIN) == set(VERIFIED)


def test_real_multi30k_val_through_ATTNMT_DATA(multi30k_dir, monkeypatch):
    monkeypatch.setenv("ATTNMT_DATA", str(multi30k_dir))
    pairs = load_multi30k("val", "de", "en")
    assert len(pairs) == 1014
    assert pairs.src[0].startswith("Eine Gruppe von Männern")
    assert pairs.tgt[0].startswith("A group of men")


def test_unzipped_file_under_ATTNMT_DATA_is_verified(tmp_path, monkeypatch, caplog):
    text = "Ein Hund läuft.\nZwei Katzen.\n".encode("utf-8")
    (tmp_path / "val.de").write_bytes(text)
    monkeypatch.setenv("ATTNMT_DATA", str(tmp_path))
    monkeypatch.setitem(corpus.MULTI30K_SHA256_PLAIN, "val.de", sha(text))
    assert multi30k_path("val", "de") == tmp_path / "val.de"
    monkeypatch.setitem(corpus.MULTI30K_SHA256_PLAIN, "val.de", sha(b"the official text"))
    with pytest.raises(DataError, match=r"val\.de: sha256 [0-9a-f]{64}, expected"):
        multi30k_path("val", "de")


def test_file_without_checksum_under_ATTNMT_DATA_warns(tmp_path, monkeypatch, caplog):
    (tmp_path / "test_2017_flickr.de").write_text("Ein Hund.\n", encoding="utf-8")
    (tmp_path / "test_2017_flickr.en.gz").write_bytes(gz(["A dog."]))
    monkeypatch.setenv("ATTNMT_DATA", str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="attnmt.data.corpus"):
        pairs = load_multi30k("test_2017_flickr", "de", "en")
    assert pairs.src == ["Ein Hund."] and pairs.tgt == ["A dog."]
    assert "test_2017_flickr.de has no known checksum: using it unverified" in caplog.text
    assert "test_2017_flickr.en.gz has no known checksum: using it unverified" in caplog.text
