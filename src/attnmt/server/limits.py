"""What one request may be, checked before any route reads it: the body's size and the time it
takes to arrive, how deeply its JSON nests, and whether its text is valid Unicode. Every refusal
is {"error": ...} naming the limit or the field, whatever the route (or no route) it was for.

A request whose client goes away before its answer is cancelled: once the body is read, the
connection is watched, and at the client's disconnect the route's work is cancelled where it
waits (the micro-batcher drops the request's sentences not yet in a batch; a document waiting
for its turn is dropped), so no CPU is spent for nobody (issue 66 group B).

    app.add_middleware(RequestLimits, max_bytes=settings.max_body_bytes)

A request's head (request line and headers) has its own deadline, set by the HTTP protocol in
connection.py, since no ASGI middleware runs before the headers are complete.
"""

from __future__ import annotations

import asyncio
import json
import re

import numpy as np

MAX_JSON_DEPTH = 32   # arrays/objects nested deeper get 400 (every request of the API needs 2 levels)
HEAD_TIMEOUT_S = 10   # the request line and headers must arrive within this, else 408 and close
BODY_TIMEOUT_S = 20   # the body must arrive within this once the headers have, else 408 and close

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # a string, its escapes included
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_SURROGATE = re.compile("[\ud800-\udfff]")


def json_depth(raw: bytes) -> int:
    """How deeply raw JSON nests arrays and objects (brackets inside strings do not count), found
    without parsing it: json.loads recurses once per level and raises RecursionError near 1,000."""
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def invalid_text(value, where: str = "") -> str | None:
    """A message naming the first string in a parsed body (keys included) that holds a lone
    surrogate, which no UTF-8 answer can carry; None when all text is valid Unicode.

    A JSON \\ud800 escape, or a multipart part decoded with an exotic charset, gives one.
    Refused rather than replaced with U+FFFD: the client's text would change without its knowing.
    """
    stack = [(where, value)]
    while stack:  # depth-first, in document order
        path, item = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found:
                return (f"Invalid request: {path or 'the body'} is not valid Unicode: a lone surrogate "
                        f"U+{ord(found.group()):04X} at character {found.start()}; send UTF-8 text")
        elif isinstance(item, dict):
            for key in item:
                if isinstance(key, str) and _SURROGATE.search(key):
                    return (f"Invalid request: a key in {path or 'the body'} is not valid Unicode "
                            "(it holds a lone surrogate); send UTF-8 text")
            stack.extend((f"{path}.{key}" if path else str(key), v) for key, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return None


def is_json(content_type: str) -> bool:
    """Whether a body of this Content-Type is read as JSON by some route ('' counts: FastAPI reads
    an untyped body as JSON)."""
    media = content_type.split(";")[0].strip().lower()
    subtype = media.rpartition("/")[2]
    return not media or subtype == "json" or subtype.endswith("+json")


def check_json_body(raw: bytes) -> str | None:
    """The refusal for a JSON body (too deep, not UTF-8, a lone surrogate), or None. A body that is
    not JSON at all is left to the route, which says so in its own words."""
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        return f"Invalid request: the JSON body is nested deeper than {MAX_JSON_DEPTH} levels ({depth})"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return (f"Invalid request: the body is not valid UTF-8 (byte 0x{raw[err.start]:02x} at offset "
                f"{err.start})")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return invalid_text(data)


class RequestLimits:
    """ASGI middleware: reads each HTTP request's body (at most `max_bytes`, within `body_timeout`
    seconds), refuses it with 413, 408 or 400 JSON, or replays it to the app."""

    def __init__(self, app, max_bytes: int, body_timeout: float = BODY_TIMEOUT_S):
        self.app = app
        self.max_bytes = max_bytes
        self.body_timeout = body_timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await refuse(send, 413, f"Invalid request: the body is over {self.max_bytes} bytes")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout
        messages, size = [], 0
        while True:  # read the body up to the limits, then replay it to the app
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                return await refuse(send, 408, f"Invalid request: the body did not arrive within "
                                               f"{self.body_timeout:g} s")
            if message["type"] != "http.request":
                messages.append(message)
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                return await refuse(send, 413, f"Invalid request: the body is over {self.max_bytes} bytes")
            messages.append(message)
            if not message.get("more_body", False):
                break
        raw = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
        if raw and is_json(headers.get(b"content-type", b"").decode("latin-1")):
            problem = check_json_body(raw)
            if problem:
                return await refuse(send, 400, problem)
        if any(m["type"] == "http.disconnect" for m in messages):
            return None  # gone while sending: nothing to answer, nothing to do
        await run_until_disconnect(self.app, scope, receive, send, messages)


async def run_until_disconnect(app, scope, receive, send, messages: list) -> None:
    """Run the app on a request whose body is `messages` (all of it), cancelling it when the
    client disconnects before the answer is complete. The app reads the body from `messages`,
    then (as uvicorn's receive does) waits for the disconnect."""
    replay = iter(messages)
    gone = asyncio.Event()
    complete = False

    async def replayed():
        try:
            return next(replay)
        except StopIteration:
            await gone.wait()
            return {"type": "http.disconnect"}

    async def sending(message):
        nonlocal complete
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            complete = True
        await send(message)

    async def watch():
        while True:  # after the body, uvicorn's receive gives only the disconnect (or the answer's end)
            if (await receive())["type"] == "http.disconnect":
                gone.set()
                return

    work = asyncio.ensure_future(app(scope, replayed, sending))
    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if not work.done() and not complete:  # the client left before its answer: stop its work
            work.cancel()
        try:
            await work
        except asyncio.CancelledError:
            if not gone.is_set():
                raise  # this task itself was cancelled (the server stops)
    finally:
        watcher.cancel()
        if not work.done():
            work.cancel()


async def refuse(send, status: int, message: str) -> None:
    """Answer {"error": message} and close the connection (the rest of the body is not read)."""
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
