"""What `attnmt serve` is told: address, limits, decoding defaults and access rules.

One frozen dataclass, validated on construction, so that the app, the batcher and the routes
read the same values and a bad flag fails before the model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnmt.config import MAX_BEAM  # the one beam cap: beam_size outside 1..MAX_BEAM gets 422

MAX_BODY_BYTES = 1 << 20   # requests over 1 MiB get 413


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"            # loopback unless --host 0.0.0.0 is asked for
    port: int = 8000
    max_wait_ms: float = 5.0           # how long the first sentence of a batch waits for company
    max_batch_sentences: int = 32      # one model call holds at most this many sentences
    max_texts: int = 64                # texts per request; more gets 413
    max_body_bytes: int = MAX_BODY_BYTES
    beam_size: int | None = None       # default beam (None: the run's search.beam_size)
    api_key: str | None = None         # when set, /translate and /v1/translate need it (else 403)
    cors_origin: str | None = None     # the one origin allowed cross-origin access (None: none)
    req_limit: int | None = None       # requests per minute per client and per API key (None: no limit)
    suggestions: str | None = None     # the JSON-lines file POST /suggest appends to (None: /suggest is off)

    def __post_init__(self):
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port={self.port} must be in 0..65535")
        if self.max_wait_ms < 0:
            raise ValueError(f"max_wait_ms={self.max_wait_ms} must be >= 0")
        if self.max_batch_sentences < 1:
            raise ValueError(f"max_batch_sentences={self.max_batch_sentences} must be >= 1")
        if self.max_texts < 1:
            raise ValueError(f"max_texts={self.max_texts} must be >= 1")
        if self.beam_size is not None and not 1 <= self.beam_size <= MAX_BEAM:
            raise ValueError(f"beam_size={self.beam_size} must be in 1..{MAX_BEAM}")
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key must not be empty")
        if self.req_limit is not None and self.req_limit < 1:
            raise ValueError(f"req_limit={self.req_limit} must be >= 1")
