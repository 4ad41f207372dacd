"""POST /suggest's log: one JSON line per suggestion (source, suggestion, pair, time), appended and
fsynced before the client hears "success", so that corrections can later become training data.

    log = SuggestionLog("suggestions.jsonl")
    await log.append("Hund .", "Dog .", "de", "en")

Lines are ASCII JSON: a newline, U+2028 or any other separator inside a text is escaped, so one
suggestion is always one line, whatever splits the file into lines.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

from attnmt.direction import Direction
from attnmt.errors import AttnmtError


class SuggestionLog:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:  # fail at start-up, not on the first suggestion
            with open(self.path, "a", encoding="utf-8"):
                pass
        except OSError as err:
            raise AttnmtError(f"--suggestions {self.path}: cannot append to it ({err.strerror})") from None
        self._lock = asyncio.Lock()

    async def append(self, source: str, suggestion: str, source_lang: str, target_lang: str) -> None:
        line = json.dumps({"source": source, "suggestion": suggestion, "pair": str(Direction(source_lang, target_lang)),
                           "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, ensure_ascii=True) + "\n"
        async with self._lock:  # whole lines, one writer at a time
            await asyncio.to_thread(self._write, line)

    def _write(self, line: str) -> None:
        with open(self.path, "a", encoding="ascii") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
