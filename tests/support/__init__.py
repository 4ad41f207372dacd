"""Helpers shared by the tests: importable modules (`from support import toy`), never imported
from a conftest by name (tests/conftest.py puts tests/ on sys.path, so `support` is found from
every test folder, whatever pytest's import mode and under pytest-xdist's workers).

    toy.py               toy corpora, configs and id batches the tiny models learn in seconds
    parts.py             the real optional parts (chromium, LibreOffice, transformers, msgfmt):
                         where each is, and the one skip a test gets when it is missing
    servers.py           `attnmt serve` as a process, the app in a thread; ports and health checks
    logged_server.py     a served toy run whose log the fuzzing tests read
    page.py              the page in chromium through Playwright: the browser, a guarded page
    document_samples.py  documents of every format made by their own libraries; fake translations
    office_render.py     LibreOffice converting and drawing documents; a page's pixels, words, fonts
    fuzzing.py           hypothesis profiles (CI, ATTNMT_FUZZ=deep)
    marian_toy.py        tiny Marian models in the Hugging Face layout
    sentence_cases.py    the splitter's hard cases
"""
