"""--req-limit N: at most N requests a minute per client address and per API key, as LibreTranslate
limits them (429 `{"error": "Slowdown: N per 1 minute"}`, its message). Counted on the endpoints
that do work: /translate, /detect, /suggest and /v1/translate.

    limiter = RateLimiter(30)
    limiter.check(["ip:127.0.0.1", "key:abc"])   # ApiError(429) when either is over its limit

A sliding window: each key keeps the times of its requests in the last minute. Keys idle for a
minute are dropped, so memory is bounded by the clients of the last minute.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable, Sequence

from attnmt.server.api_errors import ApiError

WINDOW_S = 60.0


class RateLimiter:
    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        if per_minute < 1:
            raise ValueError(f"per_minute={per_minute} must be >= 1")
        self.per_minute = per_minute
        self.clock = clock
        self._times: dict[str, deque[float]] = {}
        self._next_sweep = 0.0

    def check(self, keys: Sequence[str]) -> None:
        """Count one request against every key; 429 (counting nothing) when one is at its limit."""
        now = self.clock()
        if now >= self._next_sweep:  # forget the keys idle for a whole window
            self._times = {k: t for k, t in self._times.items() if t and t[-1] > now - WINDOW_S}
            self._next_sweep = now + WINDOW_S
        windows = [self._times.get(key) or deque() for key in keys]  # a refused request stores nothing
        for window in windows:
            while window and window[0] <= now - WINDOW_S:
                window.popleft()
        if any(len(window) >= self.per_minute for window in windows):
            raise ApiError(429, f"Slowdown: {self.per_minute} per 1 minute")
        for key, window in zip(keys, windows):
            window.append(now)
            self._times[key] = window


def check_rate(request, api_key: str | None) -> None:
    """429 when the server runs with --req-limit and this client, or the API key the request gave
    (checked before: only the server's own key counts), is over it."""
    limiter = getattr(request.app.state, "limiter", None)
    if limiter is not None:
        client = request.client.host if request.client else "unknown"
        limiter.check([f"ip:{client}"] + ([f"key:{api_key}"] if api_key else []))
