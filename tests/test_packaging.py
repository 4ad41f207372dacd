"""attnmt installed from a built wheel works outside the repository: the configs and the page's
files ship inside the package, and the CLI finds a config by name from any folder.

The wheel is built from a copy of the sources (nothing is written into the checkout) and
installed with `--no-deps` into a fresh virtual environment in a temporary folder. That
environment sees this interpreter's site-packages through a `.pth` line, for torch and the other
dependencies only: torch is not downloaded again, and no network is used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "attnmt"


def run(argv, *, cwd, check=True, **kwargs):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.setdefault("ATTNMT_CACHE", str(Path(cwd) / "cache"))
    out = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, **kwargs)
    if check and out.returncode != 0:
        raise AssertionError(f"{argv} exited {out.returncode}:\n{out.stdout}\n{out.stderr}")
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(wheel path, venv bin folder, an empty work folder outside the repository)."""
    pytest.importorskip("setuptools", reason="building the wheel needs setuptools (pip install -e '.[dev]')")
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    source.mkdir()
    shutil.copy(ROOT / "pyproject.toml", source)
    shutil.copy(ROOT / "README.md", source)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", base / "dist", source], cwd=base)
    wheel = next((base / "dist").glob("attnmt-*.whl"))

    venv = base / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=base)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    purelib = run([bin_dir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                  cwd=base).stdout.strip()
    # the dependencies (torch, ...) from this interpreter's environment, after the venv's own packages
    Path(purelib, "_attnmt_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run([sys.executable, "-m", "pip", "--python", bin_dir / "python", "install", "--no-deps", "--no-index",
         wheel], cwd=base)
    work = base / "elsewhere"
    work.mkdir()
    return wheel, bin_dir, work


def test_wheel_ships_every_data_file_of_the_package(installed):
    wheel, _, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    data = [p.relative_to(PACKAGE.parent).as_posix() for p in PACKAGE.rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    assert any(name.startswith("attnmt/configs/") for name in data)
    missing = sorted(set(data) - names)
    assert not missing, f"not in the wheel: {missing} (add them to [tool.setuptools.package-data])"


def test_installed_cli_runs_from_another_folder(installed):
    _, bin_dir, work = installed
    where = run([bin_dir / "python", "-c", "import attnmt; print(attnmt.__file__)"], cwd=work).stdout
    assert Path(where.strip()).is_relative_to(bin_dir.parent), where  # the installed copy, not the checkout
    assert "translate" in run([bin_dir / "attnmt", "--help"], cwd=work).stdout
    assert "packaged config" in run([bin_dir / "attnmt", "train", "--help"], cwd=work).stdout


def test_installed_demo_finds_its_config_and_spares_other_folders(installed):
    _, bin_dir, work = installed
    (work / "precious").mkdir()
    (work / "precious" / "notes.txt").write_text("keep me\n")
    # the demo loads its packaged default config first, then refuses the folder, before training
    out = run([bin_dir / "attnmt", "demo", "--run-dir", "precious"], cwd=work, check=False)
    assert out.returncode == 2 and "was not made by `attnmt demo`" in out.stderr, out.stderr
    assert (work / "precious" / "notes.txt").read_text() == "keep me\n"
    found = run([bin_dir / "python", "-c", "from attnmt.config import find_config; "
                 "print(find_config('quickstart_rnn'))"], cwd=work).stdout.strip()
    assert Path(found).is_relative_to(bin_dir.parent) and Path(found).is_file()


def test_installed_trains_a_packaged_config_by_name(installed, toy_corpus):
    """`attnmt train multi30k_transformer` with --set overrides: a tiny run on a toy corpus."""
    _, bin_dir, work = installed
    toy = toy_corpus
    overrides = {
        "data.corpus": "files", "data.train": toy / "train", "data.valid": toy / "valid", "data.test": toy / "test",
        "data.spm_vocab_size": 60, "data.train_subset": 64, "model.d_model": 16, "model.heads": 2,
        "model.ff_dim": 16, "model.enc_layers": 1, "model.dec_layers": 1, "train.epochs": 1,
        "train.batch_size": 256, "train.eval_max_sentences": 4, "train.num_threads": 1,
    }
    argv = [bin_dir / "attnmt", "train", "multi30k_transformer"]
    for key, value in overrides.items():
        argv += ["--set", f"{key}={value}"]
    run(argv, cwd=work, timeout=600)
    run_dir = work / "runs" / "multi30k_transformer"  # named after the config
    saved = (run_dir / "config.json").read_text()
    assert '"arch": "transformer"' in saved and '"warmup_steps": 800' in saved  # the packaged file's values
    assert (run_dir / "best.json").is_file()


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_makefile_takes_torch_from_the_index_it_is_given(tmp_path):
    """`make setup TORCH_INDEX=URL` installs torch from that index; without it, pip's own."""
    def setup_commands(*extra):
        out = run(["make", "-n", "-B", "-C", ROOT, "setup", *extra], cwd=tmp_path).stdout
        return [line for line in out.splitlines() if "pip install" in line and "torch==" in line]

    url = "https://download.pytorch.org/whl/cpu"
    [with_index] = setup_commands(f"TORCH_INDEX={url}")
    assert with_index.split()[-2:] == ["--index-url", url] and "torch==2.13.0" in with_index.split()
    [default] = setup_commands()
    assert "--index-url" not in default and "--extra-index-url" not in default
