"""What `attnmt serve` is told: address, limits, decoding defaults and access rules.

One frozen dataclass, validated on construction, so that the app, the batcher and the routes
read the same values and a bad flag fails before the model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnmt.config import MAX_BEAM  # the one beam cap: beam_size outside 1..MAX_BEAM gets 422

MAX_BODY_BYTES = 1 << 20   # requests over 1 MiB get 413
MAX_FILE_KB = 1000         # --file-limit-kb at most: a file and its form fit in one body
MAX_FILES = 100_000        # --max-files at most
MAX_SENTENCES = 100_000    # --max-sentences at most
MAX_EXPIRE_MINUTES = 7 * 24 * 60  # --files-expire-minutes at most (a week)


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
    max_sentences: int = 1000          # sentences of one request's HTML or of one file (more: 413)
    files_dir: str | None = None       # where /translate_file keeps its results (None: a temporary folder)
    file_limit_kb: int = 512           # an uploaded file's size limit (more: 413)
    files_expire_minutes: float = 60.0 # a translated file is served this long, then deleted
    max_files: int = 1000              # translated files kept at once (more, none expired: 429)

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
        if not 1 <= self.max_sentences <= MAX_SENTENCES:
            raise ValueError(f"max_sentences={self.max_sentences} must be in 1..{MAX_SENTENCES}")
        if not 1 <= self.file_limit_kb <= min(MAX_FILE_KB, self.max_body_bytes // 1000):
            raise ValueError(f"file_limit_kb={self.file_limit_kb} must be in 1..{min(MAX_FILE_KB, self.max_body_bytes // 1000)}"
                             f" (a file travels in a request body of at most {self.max_body_bytes} bytes)")
        if not 0 < self.files_expire_minutes <= MAX_EXPIRE_MINUTES:
            raise ValueError(f"files_expire_minutes={self.files_expire_minutes} must be in (0, {MAX_EXPIRE_MINUTES}]")
        if not 1 <= self.max_files <= MAX_FILES:
            raise ValueError(f"max_files={self.max_files} must be in 1..{MAX_FILES}")
