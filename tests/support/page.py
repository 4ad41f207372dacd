"""The page in chromium through Playwright: what the page tests do on it, and the values they compare
with (from /v1/translate, never from the page). The browser and a guarded page are fixtures of
tests/server/conftest.py (`browser`, `page`), which skip where chromium is missing
(support/parts.py)."""

from __future__ import annotations

import httpx
import numpy as np

GERMAN = "Hund katze rot haus ."


def open_page(page, url: str, arch: str) -> None:
    page.goto(url + "/")
    page.wait_for_function(f"document.getElementById('model-info').textContent.includes('{arch}')")


def translate_on_page(page, text: str, *, keyboard: bool = False) -> None:
    page.fill("#source-text", text)
    with page.expect_response(lambda r: "/v1/translate" in r.url):
        if keyboard:
            page.press("#source-text", "Control+Enter")
        else:
            page.click("#translate-button")
    page.wait_for_function("!document.getElementById('translate-button').disabled")


def api_translation(url: str, text: str, beam: int, **extra) -> dict:
    body = {"texts": [text], "beam_size": beam, "n_best": min(5, beam), "attention": True, **extra}
    return httpx.post(url + "/v1/translate", json=body, timeout=120).json()["translations"][0]


def grid_weights(page) -> np.ndarray:
    rows = int(page.get_attribute("#attention-grid", "data-rows"))
    cols = int(page.get_attribute("#attention-grid", "data-cols"))
    weights = page.eval_on_selector_all("#attention-grid .cell", "cells => cells.map(c => Number(c.dataset.weight))")
    return np.array(weights).reshape(rows, cols)
