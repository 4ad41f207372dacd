"""The real optional parts some tests drive: where each one is on this machine, and the one skip
a test gets where it is missing.

`make test` passes on a machine without them (skipping, with the reason), and `.ci/run` installs
them, so CI runs every such test. Each part is reached through its fixture in tests/conftest.py
(`chromium`, `soffice`, `transformers`, `msgfmt`): the fixture skips, so a test that needs the
part cannot forget to. A missing part under ATTNMT_REQUIRE_PARTS=1 (what .ci/run sets) fails
instead of skipping, so CI cannot pass by skipping.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

INSTALL = {
    "chromium": "apt-get install chromium",
    "soffice": "apt-get install libreoffice-writer libreoffice-impress poppler-utils",
    "transformers": "pip install -e '.[hf]' (the optional extra attnmt[hf])",
    "msgfmt": "apt-get install gettext",
}


def _first_file(*candidates: str | None) -> str | None:
    return next((p for p in candidates if p and Path(p).is_file()), None)


def chromium_path() -> str | None:
    """Debian's chromium (Playwright's own browser download is not reachable here)."""
    return _first_file("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))


def soffice_path() -> str | None:
    return shutil.which("soffice") or shutil.which("libreoffice")


def msgfmt_path() -> str | None:
    return shutil.which("msgfmt")


def missing(part: str, why: str) -> None:
    """Skip the test for want of `part` (with how to install it), or fail where parts are required."""
    message = f"{part} is not available ({why}): {INSTALL[part]}"
    if os.environ.get("ATTNMT_REQUIRE_PARTS") == "1":
        pytest.fail(message + "; ATTNMT_REQUIRE_PARTS=1 makes this a failure, not a skip", pytrace=False)
    pytest.skip(message, allow_module_level=True)  # a whole module may need the part


def require_chromium() -> str:
    path = chromium_path()
    if path is None:
        missing("chromium", "no chromium found")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing("chromium", "playwright (Python) is not installed")
    return path


def require_soffice() -> str:
    path = soffice_path()
    if path is None or shutil.which("pdftoppm") is None:
        missing("soffice", "soffice or pdftoppm is not installed")
    return path


def require_transformers():
    try:
        import transformers
    except ImportError as err:
        missing("transformers", f"could not import transformers: {err}")
    return transformers


def require_msgfmt() -> str:
    path = msgfmt_path()
    if path is None:
        missing("msgfmt", "gettext's msgfmt is not installed")
    return path
