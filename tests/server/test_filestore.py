"""server/filestore.py without HTTP: names, expiry by modification time, the cap, the folder's
ownership, and a folder that cannot be used (refused at start-up, naming the flag)."""

from __future__ import annotations

import os
import re

import pytest

from attnmt.errors import AttnmtError
from attnmt.server.api_errors import ApiError
from attnmt.files import LOCK_FILE
from attnmt.server.filestore import RECORD, FileStore

OWN_FILES = (RECORD, LOCK_FILE)  # what the store keeps in its folder besides the translations


def test_names_are_random_and_only_they_are_found(tmp_path):
    store = FileStore(tmp_path, expire_s=60, max_files=100)
    names = {store.save(b"x", ".txt") for _ in range(50)}
    assert len(names) == 50 and all(re.fullmatch(r"[A-Za-z0-9_-]{32}\.txt", n) for n in names)
    name = next(iter(names))
    assert store.find(name) == tmp_path / name and (tmp_path / name).read_bytes() == b"x"
    (tmp_path / "other.txt").write_text("not the store's")
    for bad in ("other.txt", "../" + name, name + "/", name.upper() + "x", "", ".", name[:-4] + ".py"):
        assert store.find(bad) is None
    with pytest.raises(ValueError, match="suffix"):
        store.save(b"x", ".sh")


def test_expired_files_are_deleted_and_make_room(tmp_path):
    now = [1_000_000.0]
    store = FileStore(tmp_path, expire_s=60, max_files=2, clock=lambda: now[0])
    (tmp_path / "notes.txt").write_text("the user's, old")
    os.utime(tmp_path / "notes.txt", (0, 0))
    first, second = store.save(b"1", ".txt"), store.save(b"2", ".html")
    os.utime(tmp_path / first, (now[0] - 61, now[0] - 61))
    os.utime(tmp_path / second, (now[0], now[0]))
    assert store.find(first) is None and not (tmp_path / first).exists()
    store.save(b"3", ".txt")
    with pytest.raises(ApiError, match=r"Too many translated files .*\(2\)") as refused:
        store.save(b"4", ".txt")
    assert refused.value.status == 429
    assert store.find(second) is not None
    assert (tmp_path / "notes.txt").exists()  # only the store's own names are ever swept


def test_a_temporary_folder_is_removed_on_close_a_given_one_is_not(tmp_path):
    owned = FileStore(None, expire_s=60, max_files=10)
    owned.save(b"x", ".txt")
    owned.close()
    assert not owned.folder.exists()
    given = FileStore(tmp_path / "kept", expire_s=60, max_files=10)
    given.close()
    assert (tmp_path / "kept").is_dir()


def test_an_unusable_folder_is_refused_naming_the_flag(tmp_path):
    (tmp_path / "a_file").write_text("")
    with pytest.raises(AttnmtError, match=r"--files-dir .*a_file.*: cannot write files there"):
        FileStore(tmp_path / "a_file" / "sub", expire_s=60, max_files=10)


@pytest.mark.parametrize("at", ["fsync", "write", "close"])
def test_a_full_disk_is_507_and_keeps_nothing_half_written(tmp_path, monkeypatch, at):
    """ENOSPC at the fsync, at write() (half the bytes written) or at close() of the stored file."""
    import builtins
    import errno
    import io

    import attnmt.files as files_module

    (tmp_path / "store").mkdir()
    store = FileStore(tmp_path / "store", expire_s=60, max_files=10)
    kept = store.save(b"an earlier translation", ".txt")

    def enospc():
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    class FullDisk:
        def __init__(self, handle):
            self.handle = handle

        def write(self, data):
            if at == "write":
                self.handle.write(data[:len(data) // 2])
                self.handle.flush()
                raise enospc()
            return self.handle.write(data)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()
            if at == "close" and exc[0] is None:
                raise enospc()

    if at == "fsync":
        def full(fd):
            raise enospc()
        monkeypatch.setattr(files_module.os, "fsync", full)
    else:
        real_open = builtins.open

        def open_(file, mode="r", *args, **kwargs):
            handle = real_open(file, mode, *args, **kwargs)
            return FullDisk(handle) if "w" in mode and str(file).endswith(".tmp") else handle
        monkeypatch.setattr(io, "open", open_)  # pathlib's write_bytes opens through io.open
        monkeypatch.setattr(builtins, "open", open_)
    with pytest.raises(ApiError) as refused:
        store.save(b"translated", ".txt")
    assert refused.value.status == 507 and "No space left on device" in str(refused.value)
    assert str(tmp_path) not in str(refused.value)  # the server's paths stay its own
    monkeypatch.undo()
    stored = sorted(p.name for p in (tmp_path / "store").iterdir() if p.name not in OWN_FILES)
    assert stored == [kept]  # nothing half-written; the earlier file kept (beside the store's record and lock)
    assert (tmp_path / "store" / kept).read_bytes() == b"an earlier translation"


def test_a_foreign_file_named_like_a_translation_is_never_served_nor_expired(tmp_path):
    """Issue 50 H: the store serves and expires only the names it saved (its record), and a
    restarted store still knows them."""
    now = [1_000_000.0]
    foreign = tmp_path / ("a" * 32 + ".txt")  # named exactly like a translation
    foreign.write_text("the user's")
    os.utime(foreign, (0, 0))  # long expired, by its modification time
    store = FileStore(tmp_path, expire_s=60, max_files=10, clock=lambda: now[0])
    assert store.find(foreign.name) is None
    mine = store.save(b"translated", ".txt")
    os.utime(tmp_path / mine, (now[0], now[0]))
    assert store.sweep() == 1 and foreign.read_text() == "the user's"
    store.close()
    again = FileStore(tmp_path, expire_s=60, max_files=10, clock=lambda: now[0])  # a restarted server
    assert again.find(mine) == tmp_path / mine and again.find(foreign.name) is None
    now[0] += 61
    assert again.sweep() == 0 and not (tmp_path / mine).exists()
    assert foreign.read_text() == "the user's"
    again.close()
    record = tmp_path / RECORD  # inside the folder it owns (issue 66 D: not beside it, in the parent)
    assert record.is_file() and sorted(p.name for p in tmp_path.iterdir() if p.name not in OWN_FILES) == [foreign.name]
    record.write_text("{not json")  # a damaged record: nothing is the store's
    third = FileStore(tmp_path, expire_s=60, max_files=10, clock=lambda: now[0])
    assert third.find(foreign.name) is None and third.sweep() == 0 and foreign.exists()
    third.close()


def test_a_forged_record_gets_no_file_of_the_users_deleted(tmp_path):
    """Issue 66 D: the record was kept beside the folder, in its parent, as a list of names; one
    edited to list the user's files (named like translations) got them deleted at expiry. Now
    it is inside the folder with each file's size and sha256: a listed file that is not the one
    the store wrote is left alone, and the old record beside the folder is not read at all."""
    import json

    now = [1_000_000.0]
    folder = tmp_path / "fd2"
    folder.mkdir()
    users = [folder / ("b" * 32 + ".txt"), folder / ("c" * 32 + ".html")]
    for path in users:
        path.write_text("the user's")
        os.utime(path, (0, 0))  # long expired
    names = [p.name for p in users]
    (tmp_path / ".fd2.attnmt-files.json").write_text(json.dumps({"format": "attnmt-filestore-1", "files": names}))
    (folder / RECORD).write_text(json.dumps({"format": "attnmt-filestore-2", "files": {
        names[0]: {"bytes": 10, "sha256": "0" * 64},  # the size is right, the digest is not
        names[1]: {"bytes": 3, "sha256": "1" * 64}}}))
    store = FileStore(folder, expire_s=60, max_files=10, clock=lambda: now[0])
    assert all(store.find(name) is None for name in names)
    assert store.sweep() == 0
    mine = store.save(b"translated", ".txt")
    os.utime(folder / mine, (now[0], now[0]))
    now[0] += 3600
    assert store.sweep() == 0 and not (folder / mine).exists()  # its own file, expired: deleted
    store.close()
    assert all(path.read_text() == "the user's" for path in users)
    (folder / mine).write_text("replaced by the user")  # a name the store wrote, now other bytes
    record = json.loads((folder / RECORD).read_text())
    record["files"][mine] = {"bytes": len(b"translated"), "sha256": "0" * 64}
    (folder / RECORD).write_text(json.dumps(record))
    os.utime(folder / mine, (0, 0))
    again = FileStore(folder, expire_s=60, max_files=10, clock=lambda: now[0] + 3600)
    assert again.find(mine) is None and again.sweep() == 0
    again.close()
    assert (folder / mine).read_text() == "replaced by the user"
