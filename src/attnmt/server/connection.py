"""The HTTP connection: uvicorn's h11 protocol with a deadline for each request's head.

uvicorn closes a keep-alive connection that stays idle, but not one over which a request arrives
slowly: a client that sends half a request line, or one header line a second (slow loris), holds
its connection for ever. Here each request line and headers get HEAD_TIMEOUT_S from the moment
the server is ready for them (the connection made, or the previous answer sent); past it the
client gets 408 (when it had sent part of a request) and the connection is closed. The body's
deadline is `limits.RequestLimits`', which can still answer in the app's JSON.

    uvicorn.Config(app, **uvicorn_options())
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from attnmt.server.limits import HEAD_TIMEOUT_S

KEEP_ALIVE_S = 5               # an idle keep-alive connection is closed after this (uvicorn's default)
MAX_HEAD_BYTES = 16 * 1024     # a request line + headers over this get 400 (h11's default, made explicit)

_MESSAGE = b'{"error":"Invalid request: the request line and headers did not arrive within %d s"}'


class HeadTimeoutProtocol(H11Protocol):
    """H11Protocol that closes a connection whose next request head is not complete in time."""

    head_timeout: float = HEAD_TIMEOUT_S
    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():  # keep-alive: the next request's head has the same deadline
            self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self._head_deadline = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_timed_out(self) -> None:
        self._head_deadline = None
        # their_state leaves IDLE when a complete head has been parsed, and returns to IDLE only
        # after the answer to that request (which re-arms the deadline): IDLE = still waiting.
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        pending, _ = self.conn.trailing_data
        if pending:
            body = _MESSAGE % self.head_timeout
            self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                                 b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        self.transport.close()


def uvicorn_options() -> dict:
    """uvicorn.Config keywords for `attnmt serve`: the protocol above and explicit h11 limits."""
    return dict(http=HeadTimeoutProtocol, timeout_keep_alive=KEEP_ALIVE_S,
                h11_max_incomplete_event_size=MAX_HEAD_BYTES)
