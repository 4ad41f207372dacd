"""Nothing of the user's is ever deleted or overwritten (issue 50, groups A, E, F, H): every verb
that writes refuses an output that equals, holds or lies inside what it reads (files.refuse_overwrite,
links resolved), `--force` / `--overwrite` replace only an earlier output of the same kind, a
refused import writes nothing, and no line of a text file is read past bounds.LINE_BYTES.

The fuzz test draws output/input relations (equal, inside, holding; through a symlink, `..`, `./`,
a trailing slash, a hard link, a relative path) for every writing verb and asserts that the
command exits 2 with one line naming both paths and that nothing on disk changed."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import parts
from support import toy
from attnmt.bounds import LINE_BYTES
from attnmt.cli import main

from test_run_safety import REPO, one_error_line  # the CLI's one error line, as the run-safety tests read it


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root`: a file's sha256, a link's target, a folder's mark."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = "-> " + os.readlink(path)
            elif path.is_dir():
                found[key] = "dir"
            else:
                found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@pytest.fixture(scope="module")
def worlds(tmp_path_factory, toy_run):
    """Read-only originals: the toy RNN run, a random Transformer run (CTranslate2 export), a tiny
    Marian folder and its imported run (`--format hf`), a toy config with its data."""
    parts.require_transformers()
    from support import marian_toy
    from attnmt.interop.marian import import_marian
    from support.toy import make_random_run

    base = tmp_path_factory.mktemp("originals")
    marian = marian_toy.write_marian(base / "opus-mt-toy")
    return {"rnn": toy_run, "transformer": make_random_run(base / "transformer"), "marian": marian,
            "imported": import_marian(marian, base / "imported").path,
            "config": toy.write_config(base / "toy.yaml")}


def copy_world(worlds: dict, name: str, into: Path) -> Path:
    source = worlds[name]
    target = into / source.name
    (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
    if name == "config":  # its data beside it, and the config reading the copy
        data = shutil.copytree(source.with_suffix(""), into / source.with_suffix("").name)
        target.write_text(source.read_text().replace(str(source.with_suffix("")), str(data)))
    return target


# ----------------------------------------------------------------------------- A: export over its own run

@pytest.mark.parametrize("fmt", ["ctranslate2", "hf"])
def test_export_over_its_own_run_is_refused_in_both_formats_and_with_dot(worlds, tmp_path, monkeypatch, capsys, fmt):
    if fmt == "ctranslate2":
        pytest.importorskip("ctranslate2")
    name = "transformer" if fmt == "ctranslate2" else "imported"
    runs = tmp_path / "S" / "runs"
    runs.mkdir(parents=True)
    run = copy_world(worlds, name, runs)
    (tmp_path / "S" / "notes.txt").write_text("the user's")
    before = snapshot(tmp_path)
    monkeypatch.chdir(tmp_path / "S")
    relative = f"runs/{run.name}"
    for output, refusal in ((".", "holds the run"), ("..", "holds the run"), ("runs", "holds the run"),
                            (relative, "is inside the run"), (f"{relative}/hf", "is inside the run"),
                            (f"{relative}/./", "is inside the run")):
        for force in ([], ["--force"]):
            assert main(["export", relative, "--format", fmt, "-o", output, *force]) == 2, (output, force)
            line = one_error_line(capsys.readouterr().err, "export")
            assert refusal in line and f"{Path(output)}: " in line and relative in line, line
    assert snapshot(tmp_path) == before  # not a file deleted, added or changed


@pytest.mark.parametrize("fmt", ["ctranslate2", "hf"])
def test_export_force_replaces_an_earlier_export_and_nothing_else(worlds, tmp_path, capsys, fmt):
    if fmt == "ctranslate2":
        pytest.importorskip("ctranslate2")
    run = copy_world(worlds, "transformer" if fmt == "ctranslate2" else "imported", tmp_path)
    out = tmp_path / "out"
    assert main(["export", str(run), "--format", fmt, "-o", str(out)]) == 0
    assert main(["export", str(run), "--format", fmt, "-o", str(out)]) == 2  # not without --force
    assert "exists and is not empty" in one_error_line(capsys.readouterr().err, "export")
    assert main(["export", str(run), "--format", fmt, "-o", str(out), "--force"]) == 0  # an earlier export: replaced
    (out / "notes.txt").write_text("the user's")
    assert main(["export", str(run), "--format", fmt, "-o", str(out), "--force"]) == 2
    assert "holds files attnmt did not write (notes.txt)" in one_error_line(capsys.readouterr().err, "export")
    assert (out / "notes.txt").read_text() == "the user's"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    assert main(["export", str(run), "--format", fmt, "-o", str(mine), "--force"]) == 2
    assert "attnmt did not write" in one_error_line(capsys.readouterr().err, "export")
    assert (mine / "thesis.tex").read_text() == "years of work"


# ----------------------------------------------------------------------------- E: other outputs over inputs

def test_average_into_the_runs_config_or_over_a_file_is_refused(worlds, tmp_path, capsys):
    run = copy_world(worlds, "rnn", tmp_path)
    before = snapshot(run)
    for output, refusal in ((run / "config.json", f"is inside the run {run}"),
                            (run / "checkpoints" / "mine.safetensors", f"is inside the run {run}"),
                            (run, "holds the checkpoint epoch_"), (tmp_path, "holds the checkpoint epoch_")):
        assert main(["average", str(run), "--last", "2", "-o", str(output)]) == 2
        line = one_error_line(capsys.readouterr().err, "average")
        assert f"{output}: {refusal}" in line and str(run) in line, line
    assert snapshot(run) == before
    notes = tmp_path / "notes.safetensors"
    notes.write_text("the user's")
    for force in ([], ["--force"]):  # an existing file: refused, and --force replaces an earlier average only
        assert main(["average", str(run), "--last", "2", "-o", str(notes), *force]) == 2
        assert str(notes) in one_error_line(capsys.readouterr().err, "average")
    assert notes.read_text() == "the user's"
    average = tmp_path / "avg.safetensors"
    assert main(["average", str(run), "--last", "2", "-o", str(average)]) == 0
    assert main(["average", str(run), "--last", "3", "-o", str(average), "--force"]) == 0  # its own kind


def test_import_over_its_source_folder_is_refused_and_overwrite_replaces_only_a_run(worlds, tmp_path, capsys):
    marian = copy_world(worlds, "marian", tmp_path)
    before = snapshot(tmp_path)
    for output in (marian, marian / "run", tmp_path):
        assert main(["import", str(marian), "-o", str(output), "--overwrite"]) == 2
        line = one_error_line(capsys.readouterr().err, "import")
        assert f"{output}: " in line and str(marian) in line, line
    other = tmp_path / "other-model"
    shutil.copytree(marian, other)  # another tool's folder with a config.json: --overwrite does not touch it
    before = snapshot(tmp_path)
    assert main(["import", str(marian), "-o", str(other), "--overwrite"]) == 2
    assert "is not an attnmt run's config" in one_error_line(capsys.readouterr().err, "import")
    assert snapshot(tmp_path) == before


def test_a_refused_import_writes_nothing(worlds, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    marian = copy_world(worlds, "marian", tmp_path)
    tensors = load_file(marian / "model.safetensors")
    name = next(n for n in tensors if n.endswith("fc1.weight"))
    tensors[name] = tensors[name].t().contiguous()  # (d_model, ff_dim): not what config.json's sizes give
    save_file(tensors, marian / "model.safetensors", metadata={"format": "pt"})
    absent, empty = tmp_path / "absent" / "run", tmp_path / "empty"
    empty.mkdir()
    for output in (absent, empty):
        assert main(["import", str(marian), "-o", str(output)]) == 2
        assert "has shape" in one_error_line(capsys.readouterr().err, "import")
    assert not absent.parent.exists() and list(empty.iterdir()) == []


# ----------------------------------------------------------------------------- F: a bound on a line

def _run_bounded(command: list[str], *, stdin=None, cwd: Path, limit_bytes: int = 1_500_000_000,
                 timeout_s: float = 90) -> tuple[int, str, int]:
    """Run `command`; kill it past `timeout_s` or `limit_bytes` of resident memory. Its return
    code, its stderr and its peak resident memory (bytes)."""
    process = subprocess.Popen(command, stdin=stdin or subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    peak, deadline = 0, time.monotonic() + timeout_s
    while process.poll() is None:
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
            peak = max(peak, int(next(l for l in status.splitlines() if l.startswith("VmRSS:")).split()[1]) * 1024)
        except (OSError, StopIteration, ValueError):
            pass
        if peak > limit_bytes or time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise AssertionError(f"{command}: killed at {peak} bytes resident after "
                                 f"{timeout_s - (deadline - time.monotonic()):.0f} s")
        time.sleep(0.05)
    return process.returncode, process.stderr.read().decode(), peak


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_line_without_end_is_refused_at_once_naming_file_line_and_limit(worlds, tmp_path):
    run = worlds["rnn"]
    python = [sys.executable, "-m", "attnmt"]
    rc, err, peak = _run_bounded([*python, "translate", str(run), "-i", "/dev/zero", "-o", "out.txt"], cwd=tmp_path)
    assert rc == 2 and one_error_line(err, "translate") == (  # a device is no line file: refused unread
        "attnmt translate: error: /dev/zero: it is a character device, not a regular file: attnmt reads only "
        "regular files (pipe text in on the standard input instead)"), err
    assert peak < 1_000_000_000, peak
    with open("/dev/zero", "rb") as zeros:  # stdin
        rc, err, _ = _run_bounded([*python, "translate", str(run)], stdin=zeros, cwd=tmp_path)
    assert rc == 2 and f"<stdin>:1: a line longer than {LINE_BYTES} bytes" in one_error_line(err, "translate")


def test_a_line_past_the_limit_in_a_file_is_refused_by_every_reader(worlds, tmp_path, capsys):
    run = worlds["rnn"]
    long_file = tmp_path / "long.txt"
    long_file.write_bytes(b"Hund .\n" + b"x" * (LINE_BYTES + 1) + b"\nBaum .\n")
    fine = tmp_path / "fine.txt"
    fine.write_bytes(b"Hund .\n" + b"x" * LINE_BYTES + b"\nBaum .\n")  # exactly the limit: read
    terms = tmp_path / "terms.tsv"
    terms.write_bytes(b"Hund\tdog\n" + b"y" * (LINE_BYTES + 5))
    cases = [("translate", ["-i", str(long_file)]),                                  # the streaming path
             ("translate", ["-i", str(long_file), "-o", str(tmp_path / "o1.txt")]),  # the sharded path
             ("score", ["-i", str(fine), "-r", str(long_file)]),
             ("score", ["-i", str(fine), "-r", str(long_file), "-o", str(tmp_path / "o2.txt")]),
             ("translate", ["-i", str(fine), "--glossary", str(terms)])]
    for verb, options in cases:
        assert main([verb, str(run), *options]) == 2, options
        line = one_error_line(capsys.readouterr().err, verb)
        where = f"{terms}:2" if "--glossary" in options else f"{long_file}:2"
        assert f"{where}: a line longer than {LINE_BYTES} bytes" in line, line
    assert not (tmp_path / "o1.txt").exists() and not (tmp_path / "o2.txt").exists()


# ----------------------------------------------------------------------------- every writing verb, fuzzed

# verb -> (the world it copies, what it reads (name -> file or folder in the copy), the command with OUT)
def _verb_setup(verb: str, worlds: dict, base: Path) -> tuple[dict[str, Path], callable]:
    if verb in ("translate", "score", "attention", "average", "serve-files", "serve-suggestions"):
        run = copy_world(worlds, "rnn", base)
        if verb == "attention":  # -o must end in an image suffix: so do the run and its folder
            (base / "box.png").mkdir()
            run = run.rename(base / "box.png" / "run.png")
        text = base / "in.txt"
        text.write_text("Hund .\nBaum .\n")
        reads = {"run": run, "checkpoint": sorted((run / "checkpoints").glob("epoch_*.safetensors"))[-1]}
        if verb in ("translate", "score"):
            reads["input"] = text
        command = {
            "translate": lambda out: ["translate", str(reads["run"]), "-i", str(text), "-o", out],
            "score": lambda out: ["score", str(reads["run"]), "-i", str(text), "-r", str(text), "-o", out],
            "attention": lambda out: ["attention", str(reads["run"]), "Hund .", "-o", out],
            "average": lambda out: ["average", str(reads["run"]), "--last", "2", "-o", out, "--force"],
            "serve-files": lambda out: ["serve", str(reads["run"]), "--port", "0", "--files-dir", out],
            "serve-suggestions": lambda out: ["serve", str(reads["run"]), "--port", "0", "--suggestions", out],
        }[verb]
        if verb in ("attention", "serve-files", "serve-suggestions"):
            reads.pop("checkpoint")
        return reads, command
    if verb in ("export", "export-hf"):
        run = copy_world(worlds, "transformer" if verb == "export" else "imported", base)
        fmt = "ctranslate2" if verb == "export" else "hf"
        return {"run": run}, lambda out: ["export", str(run), "--format", fmt, "-o", out, "--force"]
    if verb == "import":
        marian = copy_world(worlds, "marian", base)
        return {"folder": marian}, lambda out: ["import", str(marian), "-o", out, "--overwrite"]
    if verb == "train":
        config = copy_world(worlds, "config", base)
        data = config.with_suffix("")
        return ({"config": config, "train data": data / "train.de"},
                lambda out: ["train", str(config), "--run-dir", out, "--overwrite"])
    raise ValueError(verb)


VERBS = ("translate", "score", "attention", "average", "export", "export-hf", "import", "train", "serve-files",
         "serve-suggestions")


@st.composite
def clashes(draw, reads: dict[str, Path], base: Path, suffix: str, folder_output: bool = False):
    """(the read path, the relation, the target path, its spelling): an output equal to, inside or
    holding (a folder within `base` above it) one of `reads`; every target ends in `suffix`."""
    name = draw(st.sampled_from(sorted(reads)))
    read = reads[name]
    above = [folder for folder in read.parents if folder.is_relative_to(base) and folder.name.endswith(suffix)]
    equal = read.name.endswith(suffix) and not (folder_output and read.is_file())  # a folder is never a file
    relations = (["equal"] if equal else []) + (["holds"] if above else [])
    relations += ["inside"] if read.is_dir() else []
    relation = draw(st.sampled_from(relations))
    if relation == "equal":
        target = read
    elif relation == "inside":
        target = read / (draw(st.sampled_from(["x", "x/y", "checkpoints", "new.txt"])) + suffix)
    else:
        target = draw(st.sampled_from(above))
    spelling = draw(st.sampled_from(["plain", "dot", "dotdot", "link", "relative", "slash", "hardlink"]))
    return read, relation, target, spelling


def _spell(target: Path, spelling: str, base: Path) -> tuple[str, Path | None]:
    """`target` written as `spelling`: the output argument and the folder to run in (None: stay)."""
    if spelling == "dot":
        return f"{target.parent}/./{target.name}", None
    if spelling == "dotdot":
        detour = target.parent / "detour"
        detour.mkdir(exist_ok=True)
        return f"{detour}/../{target.name}", None
    if spelling == "link":  # a link to the nearest existing folder above (or at) the target, then the rest
        anchor = target
        while not anchor.exists():
            anchor = anchor.parent
        (base / "links").mkdir(exist_ok=True)
        link = base / "links" / f"l{len(list((base / 'links').iterdir()))}{''.join(target.suffixes[-1:])}"
        link.symlink_to(anchor)
        return str(link / target.relative_to(anchor)) if target != anchor else str(link), None
    if spelling == "relative":
        return os.path.relpath(target, base), base
    if spelling == "slash" and target.is_dir():
        return f"{target}/", None
    if spelling == "hardlink" and target.is_file():
        link = base / "hard" / target.name
        link.parent.mkdir(exist_ok=True)
        if not link.exists():
            os.link(target, link)
        return str(link), None
    return str(target), None


@pytest.mark.parametrize("verb", VERBS)
def test_any_output_over_what_a_verb_reads_is_refused_and_changes_nothing(worlds, tmp_path_factory, monkeypatch,
                                                                         verb):
    if verb == "export":
        pytest.importorskip("ctranslate2")
    import uvicorn

    from attnmt.training.loop import Trainer

    def started(*_args, **_kwargs):  # a refusal that failed must fail the test, not serve or train for long
        raise AssertionError("the command started its work instead of refusing the output")
    monkeypatch.setattr(uvicorn.Server, "run", started)
    monkeypatch.setattr(Trainer, "run", started)
    base = tmp_path_factory.mktemp(f"fuzz-{verb}")
    reads, command = _verb_setup(verb, worlds, base)

    @settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(clash=clashes(reads, base, ".png" if verb == "attention" else "", folder_output=verb == "train"))
    def check(clash):
        read, relation, target, spelling = clash
        if verb == "attention" and spelling == "slash":  # -o must end in the image suffix (argparse checks)
            spelling = "plain"
        output, cwd = _spell(target, spelling, base)
        before = snapshot(base)
        here = os.getcwd()
        try:
            if cwd is not None:
                os.chdir(cwd)
            code, err = _main_capturing(command(output))
        finally:
            os.chdir(here)
        verb_name = command(output)[0]
        assert code == 2, (clash, output, err)
        line = one_error_line(err, verb_name)
        assert output.rstrip("/") in line or str(Path(output)) in line, (line, output)
        assert str(read) in line or str(Path(os.path.relpath(read, base))) in line or _names_a_read(line, reads), \
            (line, read)
        assert snapshot(base) == before, (clash, output)  # nothing of the input (nor anything else) changed
    check()


def _names_a_read(line: str, reads: dict[str, Path]) -> bool:
    """Whether `line` names one of the paths the command reads (the one it found first may be
    another than the drawn one: an output holding the run holds its checkpoint too)."""
    return any(str(path) in line for path in reads.values())


def _main_capturing(argv: list[str]) -> tuple[int, str]:
    """main(argv) with its stderr captured (hypothesis runs many examples in one test)."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


# ----------------------------------------------------------------------------- issue 66 D: only what it recorded

@pytest.fixture(scope="module")
def random_transformer(tmp_path_factory):
    """A Transformer run with random weights (CTranslate2 exports it; no transformers needed)."""
    pytest.importorskip("ctranslate2")
    from support.toy import make_random_run

    return make_random_run(tmp_path_factory.mktemp("random") / "run")


def test_export_force_deletes_only_the_files_it_recorded(random_transformer, tmp_path, capsys):
    """`export --force` matched names (*.model, attnmt_*.json) and deleted the user's keep.model/,
    attnmt_notes.json, user.model and a whole run copied to other-run.model/; now it replaces
    only a folder whose every file is one its record (attnmt_written.json) lists, unchanged."""
    from attnmt.files import WRITTEN

    run, out = random_transformer, tmp_path / "exp"
    assert main(["export", str(run), "-o", str(out)]) == 0
    record = json.loads((out / WRITTEN).read_text())
    assert sorted(record["files"]) == sorted(p.name for p in out.iterdir() if p.name != WRITTEN)
    assert all(entry["sha256"] == hashlib.sha256((out / name).read_bytes()).hexdigest()
               for name, entry in record["files"].items())
    assert main(["export", str(run), "-o", str(out), "--force"]) == 0  # its own earlier export: replaced
    for name, make in (("keep.model/notes.txt", "dir"), ("attnmt_notes.json", "file"), ("user.model", "file"),
                       ("other-run.model/config.json", "dir")):
        target = out / name
        target.parent.mkdir(exist_ok=True)
        target.write_text("the user's")
        before = snapshot(out)
        assert main(["export", str(run), "-o", str(out), "--force"]) == 2, name
        line = one_error_line(capsys.readouterr().err, "export")
        assert "holds files attnmt did not write" in line and name.split("/")[0] in line, line
        assert snapshot(out) == before  # nothing deleted, nothing written
        shutil.rmtree(out / name.split("/")[0]) if "/" in name else target.unlink()
    (out / "model.bin").write_bytes(b"the user's own model.bin")  # a recorded name, other bytes
    assert main(["export", str(run), "-o", str(out), "--force"]) == 2
    assert "model.bin (changed since attnmt wrote it)" in one_error_line(capsys.readouterr().err, "export")
    assert (out / "model.bin").read_bytes() == b"the user's own model.bin"
    (out / WRITTEN).unlink()  # an export of an attnmt before the record, or a folder of the user's
    assert main(["export", str(run), "-o", str(out), "--force"]) == 2
    assert f"no record of its own, {WRITTEN}" in one_error_line(capsys.readouterr().err, "export")


def test_a_forged_or_broken_record_deletes_nothing(tmp_path):
    """Records that name files outside the folder, are links, are not JSON or list a changed
    file: refuse_replacing refuses, and remove_written never deletes outside what it lists."""
    from attnmt.errors import AttnmtError
    from attnmt.files import WRITTEN, record_written, refuse_replacing, remove_written, staged_folder

    outside = tmp_path / "thesis.tex"
    outside.write_text("years of work")
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.bin").write_bytes(b"attnmt's")
    record_written(out, kind="a test output")
    refuse_replacing(out, kind="a test output", flag="--force")  # passes: everything recorded
    good = (out / WRITTEN).read_text()
    for forged in (json.dumps({"format": "attnmt-written-1", "files": {"../thesis.tex": {"bytes": 13, "sha256": "0"}}}),
                   json.dumps({"format": "attnmt-written-1", "files": {str(outside): {"bytes": 13, "sha256": "0"}}}),
                   "{not json", json.dumps({"format": "other", "files": {}})):
        (out / WRITTEN).write_text(forged)
        with pytest.raises(AttnmtError, match="attnmt did not write"):
            refuse_replacing(out, kind="a test output", flag="--force")
        remove_written(out)
        assert outside.read_text() == "years of work" and (out / "a.bin").exists()
        (out / WRITTEN).write_text(good)
    (out / WRITTEN).unlink()
    (out / WRITTEN).symlink_to(outside)  # a link in the record's place is no record
    with pytest.raises(AttnmtError, match="attnmt did not write"):
        refuse_replacing(out, kind="a test output", flag="--force")
    (out / WRITTEN).unlink()
    record_written(out, kind="a test output")
    with pytest.raises(AttnmtError, match=r"holds files attnmt did not write \(late\.txt\)"):
        with staged_folder(out, kind="a test output") as staging:  # a file appears while the new one is written
            (staging / "b.bin").write_bytes(b"new")
            (out / "late.txt").write_text("the user's, meanwhile")
    assert (out / "late.txt").exists() and (out / "a.bin").exists() and not (out / "b.bin").exists()
    (out / "late.txt").unlink()
    with staged_folder(out, kind="a test output") as staging:
        (staging / "b.bin").write_bytes(b"new")
    assert sorted(p.name for p in out.iterdir()) == sorted(["b.bin", WRITTEN])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "thesis.tex"]  # nothing left aside


def test_average_force_replaces_only_an_unchanged_average(toy_run, tmp_path, capsys):
    """--force over a file whose metadata says `averaged` but whose tensors are not the ones it
    recorded (edited, or a forged header) is refused: the file's own record must still hold."""
    import torch
    from safetensors.torch import save_file

    run = tmp_path / "run"
    shutil.copytree(toy_run, run)
    average = tmp_path / "avg.safetensors"
    assert main(["average", str(run), "--last", "2", "-o", str(average)]) == 0
    assert main(["average", str(run), "--last", "2", "-o", str(average), "--force"]) == 0
    save_file({"w": torch.zeros(2)}, str(average), metadata={"averaged": "epoch_1", "attnmt_sha256": "0" * 64})
    assert main(["average", str(run), "--last", "2", "-o", str(average), "--force"]) == 2
    assert "is not an earlier average as `attnmt average` wrote it" in one_error_line(capsys.readouterr().err,
                                                                                      "average")
    save_file({"w": torch.zeros(2)}, str(average), metadata={"averaged": "epoch_1"})  # no digest: not its record
    assert main(["average", str(run), "--last", "2", "-o", str(average), "--force"]) == 2
    capsys.readouterr()
