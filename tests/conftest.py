"""Shared fixtures: tiny generated parallel corpora and tiny configs (from tests/support/toy.py), so CLI
tests run in seconds."""

import os
import sys
import tempfile
from pathlib import Path

import pytest
import torch

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:  # `import toy` from every test folder, whatever pytest's import mode
    sys.path.insert(0, str(TESTS))

from support import parts, toy  # noqa: E402
from support.once import once  # noqa: E402

torch.set_num_threads(1)  # tiny models gain nothing from more, and lose much when cores are shared
# ... and so do the commands the tests start (attnmt serve, translate, train in a process of its own): one
# thread each unless the caller says otherwise, or each would take every core beside the other workers
os.environ.setdefault("OMP_NUM_THREADS", "1")

# One cache for the session (prepared data, sentencepiece models): shared by the tests and the
# commands they start, never the user's own; tests that need a cache of their own set one.
_SESSION_CACHE = tempfile.TemporaryDirectory(prefix="attnmt-test-cache-")
os.environ["ATTNMT_CACHE"] = _SESSION_CACHE.name

REPO = TESTS.parent


def find_multi30k() -> Path:
    """The local Multi30k folder: $ATTNMT_DATA, else ../shared/data/multi30k beside the repository
    (where CI's fresh clone finds it). Read once, at import, before any test changes the env."""
    if os.environ.get("ATTNMT_DATA"):
        return Path(os.environ["ATTNMT_DATA"]).expanduser()
    return REPO.parent / "shared" / "data" / "multi30k"


MULTI30K_DIR = find_multi30k()


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """The real Multi30k files (train/val/test_2016_flickr .gz). Skips where they are missing,
    except under CI=true, where a missing data folder fails the test: CI must run these."""
    if (MULTI30K_DIR / "train.de.gz").is_file():
        return MULTI30K_DIR
    message = (f"Multi30k not found at {MULTI30K_DIR} (set ATTNMT_DATA, or put the files in "
               f"../shared/data/multi30k beside the repository)")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + "; under CI=true this is a failure, not a skip", pytrace=False)
    pytest.skip(message)


# ---- the real optional parts (support/parts.py): each test that needs one asks for its fixture,
# which skips (with how to install it) where the part is missing, or fails under ATTNMT_REQUIRE_PARTS=1


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of Debian's chromium, with Playwright for Python importable."""
    return parts.require_chromium()


@pytest.fixture(scope="session")
def soffice() -> str:
    """The path of LibreOffice's soffice (and poppler's pdftoppm beside it)."""
    return parts.require_soffice()


@pytest.fixture(scope="session")
def transformers():
    """The `transformers` module (the optional extra attnmt[hf])."""
    return parts.require_transformers()


@pytest.fixture(scope="session")
def msgfmt() -> str:
    """The path of gettext's msgfmt."""
    return parts.require_msgfmt()


@pytest.fixture
def toy_corpus(tmp_path):
    """Files toy/{train,valid,test}.{de,en} in tmp_path; returns the folder."""
    return toy.write_corpus(tmp_path / "toy")


@pytest.fixture
def toy_config(tmp_path, toy_corpus):
    """A tiny RNN config over the toy corpus."""
    path = tmp_path / "toy.yaml"
    path.write_text(toy.config_text(toy_corpus))
    return path


@pytest.fixture(scope="session")
def multilingual_run(tmp_path_factory):
    """A tiny Transformer trained once per session on the six directions between de, en and fr of a
    multiway toy corpus, the language token first in the target (forced when decoding)."""
    return toy.train_multilingual(tmp_path_factory, "target")


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory):
    """A tiny RNN trained once per test session on the toy corpus; returns its run directory."""
    from attnmt.cli import main

    def build(base):
        config = toy.write_config(base / "toy.yaml")
        assert main(["train", str(config), "--run-dir", str(base / "run"), "--set", "train.epochs=5"]) == 0
        return base / "run"

    return once(tmp_path_factory, "toy_run", build)


@pytest.fixture(scope="session")
def toy_seed_runs(tmp_path_factory):
    """Two tiny RNNs of one config trained with seeds 1 and 2 (`attnmt train --seeds 1,2`, two
    epochs: good, not perfect); returns their run directories."""
    from attnmt.cli import main

    def build(base):
        config = toy.write_config(base / "toy.yaml")
        argv = ["train", str(config), "--run-dir", str(base / "run"), "--seeds", "1,2", "--set", "train.epochs=2"]
        assert main(argv) == 0
        return [base / "run-seed1", base / "run-seed2"]

    return once(tmp_path_factory, "toy_seed_runs", build)
