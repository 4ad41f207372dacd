"""One output line per input line (issue 24 item 15): `translate` and `score` read a file and
stdin by the same rule, lines end at \\n only (a \\r right before it is dropped), so CR, NUL,
form feed and Unicode line separators inside a line stay inside it. Run through the real CLI."""

import io
import subprocess
import sys

import pytest

from attnmt.cli import main
from attnmt.commands.text_io import read_lines

# Three lines holding every character that some reader takes for a line break.
ODD_LINES = ["Hund\rkatze .", "Baum\x00 rot\x0c blau\x0b .", "Mann\u2028Frau\x85 Kind\u2029\x1c\x1d\x1e ."]
ODD_BYTES = (ODD_LINES[0] + "\n" + ODD_LINES[1] + "\r\n" + ODD_LINES[2] + "\n").encode("utf-8")


def test_the_line_rule():
    assert list(read_lines(io.BytesIO(ODD_BYTES))) == ODD_LINES
    cases = {b"": [], b"a": ["a"], b"a\n": ["a"], b"a\n\n": ["a", ""], b"\n": [""], b"a\r\n": ["a"],
             b"a\r\r\n": ["a\r"], b"a\rb": ["a\rb"], b"\r": ["\r"], b"a\xffb\n\xe2\x82\n": ["a\ufffdb", "\ufffd"]}
    for raw, lines in cases.items():
        assert list(read_lines(io.BytesIO(raw))) == lines, raw
        assert list(read_lines(io.StringIO(raw.decode("utf-8", "replace"), newline="\n"))) == lines, raw


def _cli(args, **kwargs):
    return subprocess.run([sys.executable, "-m", "attnmt", *args], capture_output=True, **kwargs)


@pytest.mark.parametrize("brk", ["\n", "\r", "\r\n", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_a_written_text_reads_back_as_one_line_whatever_the_reader_splits_on(brk):
    """files.one_line, the rule of translate's outputs and distill's teacher files: each break that
    str.splitlines() or a "\\n" split sees becomes a space."""
    from attnmt.commands.text_io import output_line
    from attnmt.files import one_line

    line = output_line(f"Ein Hund{brk}läuft")
    assert line.splitlines() == [line[:-1]] and line.count("\n") == 1 and line.endswith("\n")
    assert one_line(f"a{brk}b").replace(" ", "") == "ab"


def test_translate_gives_one_line_per_input_line_from_a_file_and_from_stdin(toy_run, tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(ODD_BYTES)
    from_file = _cli(["translate", str(toy_run), "--beam", "1", "-i", str(path)])
    from_stdin = _cli(["translate", str(toy_run), "--beam", "1"], input=ODD_BYTES)
    for out in (from_file, from_stdin):
        assert out.returncode == 0, out.stderr.decode()
        assert out.stdout.count(b"\n") == len(ODD_LINES) and out.stdout.endswith(b"\n"), out.stdout
        assert len(out.stdout.decode("utf-8").splitlines()) == len(ODD_LINES)  # no break inside an output line
    assert from_file.stdout == from_stdin.stdout


def test_translate_writes_a_file_with_one_line_per_input_line(toy_run, tmp_path):
    (tmp_path / "in.txt").write_bytes(ODD_BYTES)
    out = _cli(["translate", str(toy_run), "--beam", "1", "-i", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt")])
    assert out.returncode == 0, out.stderr.decode()
    assert (tmp_path / "out.txt").read_bytes().count(b"\n") == len(ODD_LINES)


def test_n_best_keeps_its_blocks_aligned(toy_run, tmp_path, capsys):
    (tmp_path / "in.txt").write_bytes(ODD_BYTES)
    assert main(["translate", str(toy_run), "--beam", "2", "--n-best", "2", "-i", str(tmp_path / "in.txt")]) == 0
    blocks = capsys.readouterr().out.split("\n\n")
    assert len(blocks) == len(ODD_LINES) + 1 and blocks[-1] == ""
    assert all(len(block.strip("\n").split("\n")) == 2 for block in blocks[:-1])


def test_score_reads_files_by_the_same_rule(toy_run, tmp_path):
    (tmp_path / "src.txt").write_bytes(ODD_BYTES)
    (tmp_path / "ref.txt").write_bytes(b"dog\rcat .\ntree red blue .\r\nman\xe2\x80\xa8woman child .\n")
    out = _cli(["score", str(toy_run), "-i", str(tmp_path / "src.txt"), "-r", str(tmp_path / "ref.txt")])
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.count(b"\n") == len(ODD_LINES)


@pytest.mark.parametrize("stdin", [None, "closed"])
def test_translate_without_stdin_is_one_line(toy_run, stdin, capsys, monkeypatch):
    if stdin is None:
        monkeypatch.setattr(sys, "stdin", None)  # `attnmt translate RUN <&-` under some shells / services
    else:
        closed = io.StringIO("")
        closed.close()
        monkeypatch.setattr(sys, "stdin", closed)
    assert main(["translate", str(toy_run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnmt translate: error: ") and "standard input" in err and "Traceback" not in err
