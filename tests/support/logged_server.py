"""`attnmt serve` as a real process whose log is read while it runs, for the hostile-input and
fuzzing tests (imported by them; not a conftest). conftest's ServeProcess reads its output only
when it stops: a stream of failing requests, each logging a traceback, fills the 64 KiB pipe and
then blocks the server's event loop in a log write. Here a thread drains the log into `lines`,
so a test can also assert that no request left a traceback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

STARTUP_SECONDS = 180


class LoggedServer:
    """`python -m attnmt serve RUN_DIR --port P ...` on 127.0.0.1, its output kept in `lines`."""

    def __init__(self, run_dir: Path, *flags: str):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        src = str(Path(__file__).resolve().parents[2] / "src")
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, "-m", "attnmt", "serve", str(run_dir), "--port", str(self.port),
                                      *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        try:
            self._wait_healthy()
        except Exception:
            self.stop()
            raise

    def _drain(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}:\n{self.log}")
            try:
                if httpx.get(self.url + "/health", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.url} did not become healthy in {STARTUP_SECONDS} s:\n{self.log}")

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int | None:
        """SIGTERM, then the exit status (the process is killed if it does not stop in 60 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=10)
        return self.proc.returncode
