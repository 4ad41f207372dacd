"""`attnmt translate` / `score` from a file into a file in resumable shards (sharding.py), on one
process and on 2 CPU ranks (gloo): the ranks are forked with torchrun's environment as in
tests/training/test_distributed.py, and one test runs torchrun itself. Every multi-process run has a hard
timeout. The expected outputs come from Translator.translate / score called once on all lines."""

import hashlib
import os
import re
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import attnmt
import attnmt.sharding as sharding
from attnmt.cli import main
from attnmt.errors import DataError
from attnmt.sharding import LinePlan, ShardedJob, plan_lines, read_shard, threads_per_rank, work_folder
from attnmt.world import World
from attnmt.translator import Translator

from support import toy
from support.ranks import RANKS_TIMEOUT_S, run_ranks

PAIRS = toy.copy_pairs(50, seed=25)
SOURCES = [src for src, _ in PAIRS]
TARGETS = [tgt for _, tgt in PAIRS]
SHARD = ["--shard-lines", "7"]  # 50 lines: 8 shards, the last of 1 line


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """src.txt (its 3rd line ends in CRLF, which the line rule drops) and ref.txt."""
    folder = tmp_path_factory.mktemp("shards")
    lines = [line + ("\r\n" if i == 2 else "\n") for i, line in enumerate(SOURCES)]
    (folder / "src.txt").write_bytes("".join(lines).encode("utf-8"))
    (folder / "ref.txt").write_text("".join(t + "\n" for t in TARGETS), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def expected(toy_run):
    """Translations (beam 2) and scores of all lines by one direct call each."""
    translator = Translator.load(toy_run)
    texts = [r.text for r in translator.translate(SOURCES, beam_size=2)]
    return texts, translator.score(SOURCES, TARGETS)


def translate_argv(run, files, out, *extra):
    return ["translate", str(run), "-i", str(files / "src.txt"), "-o", str(out), "--beam", "2", *SHARD, *extra]


def cli(rank, argv):
    return main(argv)


def kill_after_shards(rank, argv, shards):
    """Each rank SIGKILLs itself right after writing its `shards`-th shard, as if the node went down."""
    original, written = sharding.atomic_write, []

    def write(path, func):
        original(path, func)
        written.append(path)
        if len(written) == shards:
            os.kill(os.getpid(), signal.SIGKILL)

    sharding.atomic_write = write
    return main(argv)


def read_lines(path):
    return Path(path).read_text(encoding="utf-8").split("\n")[:-1]


def test_plan_lines_cuts_at_newlines_only_and_ranks_take_pending_shards_round_robin(tmp_path):
    raw = b"a\nb\r\nc\rd\ne"  # 4 lines: a lone \r stays inside its line; the last has no \n
    (tmp_path / "in.txt").write_bytes(raw)
    plan = plan_lines(str(tmp_path / "in.txt"), 3)
    assert (plan.lines, plan.starts, plan.sha256) == (4, (0, 9), hashlib.sha256(raw).hexdigest())
    assert read_shard(plan, 0, 3) == [b"a\n", b"b\r\n", b"c\rd\n"] and read_shard(plan, 1, 3) == [b"e"]
    (tmp_path / "empty.txt").write_bytes(b"")
    assert plan_lines(str(tmp_path / "empty.txt"), 3).starts == ()
    with pytest.raises(ValueError, match="shard_lines=0 must be 1 or more"):
        plan_lines(str(tmp_path / "in.txt"), 0)
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(DataError, match="pipe: not a regular file"):
        plan_lines(str(tmp_path / "pipe"), 3)
    plan = LinePlan(path="x", lines=22, sha256="", starts=tuple(range(8)))
    job = ShardedJob(plans=(plan,), output=Path("out"), shard_lines=3, pending=(0, 2, 3, 5, 6, 7), world=World(1, 2))
    assert job.mine == (2, 5, 7) and job.shard_size(7) == 1 and job.folder == Path("out.shards")


def test_threads_per_rank_shares_the_cpus_among_the_ranks_of_a_node(monkeypatch):
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert threads_per_rank(None) is None and threads_per_rank(3) == 3
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert threads_per_rank(None) == max(1, cpus // 2) and threads_per_rank(5) == 5


def test_two_ranks_translate_what_one_call_translates(toy_run, files, expected, tmp_path):
    out = tmp_path / "out.txt"
    assert run_ranks(cli, translate_argv(toy_run, files, out)) == [0, 0]
    assert read_lines(out) == expected[0]
    assert not work_folder(out).exists()  # removed once the output is written


def test_a_killed_job_resumes_without_redoing_finished_shards(toy_run, files, expected, tmp_path):
    out = tmp_path / "out.txt"
    assert run_ranks(kill_after_shards, translate_argv(toy_run, files, out), 2) == [-signal.SIGKILL] * 2
    assert not out.exists()
    folder = work_folder(out)
    assert sorted(p.name for p in folder.glob("shard-*.txt")) == [f"shard-00000{i}.txt" for i in range(4)]
    assert read_lines(folder / "shard-000001.txt") == expected[0][7:14]
    (folder / "shard-000001.txt").write_text("".join(f"done before {i}\n" for i in range(7)), encoding="utf-8")
    (folder / ".shard-000004.txt.half.tmp").write_text("half-written\n")  # what a kill inside atomic_write leaves

    assert run_ranks(cli, translate_argv(toy_run, files, out), world_size=3) == [0, 0, 0]  # any number of ranks
    assert read_lines(out) == expected[0][:7] + [f"done before {i}" for i in range(7)] + expected[0][14:]
    assert not folder.exists()


def test_one_process_resumes_too_and_refuses_another_job_s_folder(toy_run, files, expected, tmp_path, monkeypatch,
                                                                  capsys):
    out = tmp_path / "out.txt"
    original, written = sharding.atomic_write, []

    def crash_at_third(path, func):
        if len(written) == 2:
            raise KeyboardInterrupt
        original(path, func)
        written.append(path)

    monkeypatch.setattr(sharding, "atomic_write", crash_at_third)
    assert main(translate_argv(toy_run, files, out)) == 130
    monkeypatch.setattr(sharding, "atomic_write", original)
    folder = work_folder(out)
    assert len(list(folder.glob("shard-*.txt"))) == 2
    capsys.readouterr()
    changed = tmp_path / "changed.txt"
    changed.write_bytes((files / "src.txt").read_bytes() + b"Hund .\n")
    for argv, difference in [(translate_argv(toy_run, files, out, "--beam", "3", "--alignments"),
                              "alignments: False -> True; beam_size: 2 -> 3"),
                             (translate_argv(toy_run, files, out)[:-1] + ["5"], "shard_lines: 7 -> 5"),
                             (["translate", str(toy_run), "-i", str(changed), "-o", str(out), "--beam", "2", *SHARD],
                              f"the input changed: {changed}")]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"{folder} holds 2 finished shard(s) of another job ({difference})" in err, err
        assert f"or remove {folder} to start over" in err
    manifest = (folder / "manifest.json").read_text()
    (folder / "manifest.json").write_text("[]")  # edited by hand: differs in everything, no traceback
    assert main(translate_argv(toy_run, files, out)) == 2
    assert "the input changed" in capsys.readouterr().err
    (folder / "manifest.json").write_text(manifest)
    assert main(translate_argv(toy_run, files, out)) == 0
    assert read_lines(out) == expected[0]
    assert not folder.exists()


def test_bad_options_are_refused_before_the_work_folder_is_made(toy_run, files, tmp_path, capsys):
    out = tmp_path / "out.txt"
    assert main(translate_argv(toy_run, files, out, "--n-best", "3")) == 2
    assert "n_best=3 must be between 1 and beam_size=2" in capsys.readouterr().err
    assert not work_folder(out).exists() and not out.exists()


def test_a_folder_that_is_not_attnmt_s_is_refused_not_removed(toy_run, files, tmp_path, capsys):
    out = tmp_path / "out.txt"
    work_folder(out).mkdir()
    (work_folder(out) / "notes.txt").write_text("mine")
    assert main(translate_argv(toy_run, files, out)) == 2
    assert "out.txt.shards exists and has no manifest.json: it is not attnmt's work folder" in capsys.readouterr().err
    assert (work_folder(out) / "notes.txt").read_text() == "mine"


def test_two_ranks_score_what_one_call_scores(toy_run, files, expected, tmp_path):
    out = tmp_path / "scores.txt"
    argv = ["score", str(toy_run), "-i", str(files / "src.txt"), "-r", str(files / "ref.txt"), "-o", str(out), *SHARD]
    assert run_ranks(cli, argv) == [0, 0]
    rows = [line.split("\t") for line in read_lines(out)]
    assert [int(r[2]) for r in rows] == [s.num_tokens for s in expected[1]]
    assert [float(r[0]) for r in rows] == pytest.approx([s.log_prob for s in expected[1]], abs=2e-5)
    assert [float(r[1]) for r in rows] == pytest.approx([s.normalized for s in expected[1]], abs=2e-5)


@pytest.mark.parametrize("extra,message", [
    (["--shard-lines", "0"], "argument --shard-lines: 0 must be a positive integer"),
    (["--shard-lines", "1000001"], "argument --shard-lines: 1000001 must be at most 1000000"),
    (["--shard-lines", "1e9"], "argument --shard-lines: '1e9' is not an integer"),
    (["--threads", "0"], "argument --threads: 0 must be a positive integer"),
    (["--threads", "99999"], "argument --threads: 99999 must be at most 1024"),
])
@pytest.mark.parametrize("verb", ["translate", "score"])
def test_hostile_shard_and_thread_values_are_refused(verb, extra, message, toy_run, files, capsys):
    reference = ["-r", str(files / "ref.txt")] if verb == "score" else []
    argv = [verb, str(toy_run), "-i", str(files / "src.txt"), *reference, *extra]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_unaligned_files_shard_lines_on_a_stream_and_streams_under_torchrun_are_refused(toy_run, files, tmp_path,
                                                                                         capsys, monkeypatch):
    short = tmp_path / "short.txt"
    short.write_text("Dog .\n")
    argv = ["score", str(toy_run), "-i", str(files / "src.txt"), "-r", str(short), "-o", str(tmp_path / "o.txt")]
    assert main(argv) == 2
    assert f"{files / 'src.txt'} has 50 lines, {short} has 1" in capsys.readouterr().err
    assert main(["score", str(toy_run), "-i", str(files / "src.txt"), "-r", str(files / "ref.txt"), *SHARD]) == 2
    assert "--shard-lines works from -i FILE into -o FILE (regular files) or under torchrun; here the lines " \
           "stream: drop it" in capsys.readouterr().err  # accepted and ignored would mislead
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["translate", str(toy_run), "-i", str(files / "src.txt")]) == 2
    assert "under torchrun, give -i FILE and -o FILE" in capsys.readouterr().err


def test_a_pipe_as_input_streams_on_one_process(toy_run, tmp_path, expected):
    os.mkfifo(tmp_path / "pipe")

    def write():
        with open(tmp_path / "pipe", "w") as pipe:  # waits for the reader
            pipe.write(SOURCES[0] + "\n")

    threading.Thread(target=write, daemon=True).start()
    out = tmp_path / "out.txt"
    assert main(["translate", str(toy_run), "-i", str(tmp_path / "pipe"), "-o", str(out), "--beam", "2"]) == 0
    assert read_lines(out) == expected[0][:1] and not work_folder(out).exists()


def test_a_pipe_as_output_is_written_to_not_replaced(toy_run, files, tmp_path, expected, monkeypatch, capsys):
    os.mkfifo(tmp_path / "pipe")
    received = []

    def read():
        with open(tmp_path / "pipe", encoding="utf-8") as pipe:  # waits for the writer
            received.extend(pipe.read().splitlines())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    argv = ["translate", str(toy_run), "-i", str(files / "src.txt"), "-o", str(tmp_path / "pipe"), "--beam", "2"]
    assert main(argv) == 0
    reader.join(RANKS_TIMEOUT_S)
    assert received == expected[0] and stat.S_ISFIFO(os.stat(tmp_path / "pipe").st_mode)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(argv) == 2  # under torchrun it would be replaced: refused before anything else
    assert "pipe: not a regular file; the output is written to a new file" in capsys.readouterr().err


def test_torchrun_translates_a_file_on_two_ranks(toy_run, files, expected, tmp_path):
    """The documented command, `torchrun --nproc-per-node 2 -m attnmt translate ...`, with its progress log."""
    src = str(Path(attnmt.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "out.txt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "attnmt",
           *translate_argv(toy_run, files, out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=2 * RANKS_TIMEOUT_S)  # torchrun and 2 ranks start slowly
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"the torchrun job did not end within {2 * RANKS_TIMEOUT_S} s")
    assert proc.returncode == 0, output
    assert read_lines(out) == expected[0]
    assert re.search(rf"{re.escape(str(out))}: [1-8]/8 shards done, [0-9.]+ sentences/s over 2 rank\(s\), "
                     rf"[0-9]+ sentences left \(about [0-9:]+\)", output)  # after each of rank 0's shards
    assert f"wrote {out}: 50 input line(s) in 8 shard(s), " in output and "sentences/s over 2 rank(s)" in output
