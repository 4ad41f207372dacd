"""What `attnmt serve` is told: address, limits, decoding defaults and access rules.

One frozen dataclass, validated on construction, so that the app, the batcher and the routes
read the same values and a bad flag fails before the model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnmt.bounds import (BEAM, CONFIDENCE, EXPIRE_MINUTES, FILE_KB, FILES, MAX_BODY_BYTES, PORT, SENTENCES, WAIT_MS, Bound)

AT_LEAST_ONE = Bound(1, 2**63 - 1)  # counts with no cap of their own


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"            # loopback unless --host 0.0.0.0 is asked for
    port: int = 8000
    max_wait_ms: float = 5.0           # how long the first sentence of a batch waits for company
    max_batch_sentences: int = 32      # one model call holds at most this many sentences
    max_texts: int = 64                # texts per request; more gets 413
    max_body_bytes: int = MAX_BODY_BYTES
    beam_size: int | None = None       # default beam (None: the run's search.beam_size)
    min_confidence: float | None = None  # a translation less confident is not given: its source, with a warning
    api_key: str | None = None         # when set, /translate and /v1/translate need it (else 403)
    cors_origin: str | None = None     # the one origin allowed cross-origin access (None: none)
    req_limit: int | None = None       # requests per minute per client and per API key (None: no limit)
    suggestions: str | None = None     # the JSON-lines file POST /suggest appends to (None: /suggest is off)
    max_sentences: int = 1000          # sentences of one request's HTML or of one file (more: 413)
    files_dir: str | None = None       # where /translate_file keeps its results (None: a temporary folder)
    file_limit_kb: int = 512           # an uploaded file's size limit (more: 413)
    files_expire_minutes: float = 60.0 # a translated file is served this long, then deleted
    max_files: int = 1000              # translated files kept at once (more, none expired: 429)

    def __post_init__(self):
        for name, bound in BOUNDS.items():
            value = getattr(self, name)
            if value is not None:  # an optional setting left unset
                bound.check(name, value)
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key must not be empty")
        if self.file_limit_kb > self.max_body_bytes // 1000:
            raise ValueError(f"file_limit_kb={self.file_limit_kb} must be in 1..{self.max_body_bytes // 1000}"
                             f" (a file travels in a request body of at most {self.max_body_bytes} bytes)")


# field -> its Bound (bounds.py holds the ones the CLI or the request bodies share)
BOUNDS = {"port": PORT, "max_wait_ms": WAIT_MS, "max_batch_sentences": AT_LEAST_ONE, "max_texts": AT_LEAST_ONE,
          "max_body_bytes": AT_LEAST_ONE, "beam_size": BEAM, "min_confidence": CONFIDENCE, "req_limit": AT_LEAST_ONE, "max_sentences": SENTENCES,
          "file_limit_kb": FILE_KB, "files_expire_minutes": EXPIRE_MINUTES, "max_files": FILES}
