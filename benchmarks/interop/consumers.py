"""The real consumers of Argos packages, driven from attnmt's side: argostranslate and
LibreTranslate from PyPI, each in its own virtual environment (argos_env.sh), run with the
network cut, so a package must carry everything it needs.

    python = env_python("argostranslate")                      # builds the environment once (minutes)
    found = argos_translate(python, "de_en.argosmodel", "de", "en", texts, home=tmp)   # its outputs
    with libretranslate(env_python("libretranslate"), ["de_en.argosmodel"], ["de", "en"], home=tmp) as url:
        LibreTranslateAPI(url).translate("Ein Hund.", "de", "en")

Offline: `unshare -n` (a network namespace with no interface up) where the kernel allows it, and
in any case every proxy variable pointed at 127.0.0.1:9 (a closed port), with HOME and the XDG
folders inside `home`: argostranslate's packages, stanza's, MiniSBD's and Hugging Face's caches all
start empty, so a download would be needed and would fail. LibreTranslate serves on 127.0.0.1, so
it runs with the proxies only (its own namespace would hide it from the client).

Shapes: none.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Sequence

HERE = Path(__file__).resolve().parent
ENV_SCRIPT = HERE / "argos_env.sh"
RUNNER = HERE / "argos_run.py"
CLOSED = "http://127.0.0.1:9"  # the discard port: nothing listens there


class Unavailable(RuntimeError):
    """An environment that could not be built here (no registry), with the reason."""


def env_python(name: str, *, timeout: float = 1800) -> Path:
    """The python of the environment `name` (argostranslate, libretranslate, eole), built by
    argos_env.sh on first use (its cache: $ATTNMT_ARGOS_ENVS).

    Raises:
        Unavailable: the script failed (no network, a pin that does not resolve), with its last lines.
    """
    try:
        done = subprocess.run(["bash", str(ENV_SCRIPT), name], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"building the {name} environment took over {timeout:.0f} s") from None
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise Unavailable(f"benchmarks/interop/argos_env.sh {name} failed: {tail}")
    return Path(done.stdout.strip().splitlines()[-1])


def can_unshare() -> bool:
    """Whether `unshare -n` works here (root, or user namespaces allowed)."""
    try:
        return subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def offline_env(home: Path, extra: dict | None = None) -> dict:
    """The environment of a consumer: its own HOME and XDG folders under `home`, every proxy at a
    closed port, Hugging Face offline."""
    home.mkdir(parents=True, exist_ok=True)
    env = {key: value for key, value in os.environ.items()
           if not key.lower().endswith("_proxy") and not key.startswith(("ARGOS_", "XDG_", "LT_"))}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config"),
               XDG_CACHE_HOME=str(home / "cache"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               STANZA_RESOURCES_DIR=str(home / "stanza"), PYTHONNOUSERSITE="1", OMP_NUM_THREADS="1",
               ARGOS_INTER_THREADS="1", ARGOS_INTRA_THREADS="1")
    for key in ("http_proxy", "https_proxy", "all_proxy", "ftp_proxy"):
        env[key] = env[key.upper()] = CLOSED
    env["no_proxy"] = env["NO_PROXY"] = ""
    env.update(extra or {})
    return env


def _run_json(command: Sequence[str], payload, env: dict, timeout: float):
    done = subprocess.run(list(command), input=json.dumps(payload, ensure_ascii=False), capture_output=True,
                          text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command[:4]))} ... failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def argos_translate(python: Path, package: Path | Sequence[Path], from_code: str, to_code: str,
                    texts: list[str], *, home: Path, timeout: float = 1800, settings: dict | None = None) -> dict:
    """argostranslate's own `package.install_from_path` then `translate.translate` of each text,
    offline (module docstring), with argostranslate's `settings` (ARGOS_BEAM_SIZE, ...) as its
    environment variables: {"outputs", "seconds", "installed", "sentencizer", "beam_size", ...}."""
    packages = [package] if isinstance(package, (str, Path)) else list(package)
    command = [str(python), str(RUNNER), "translate", from_code, to_code, *map(str, packages)]
    if can_unshare():
        command = ["unshare", "-n", *command]
    return _run_json(command, texts, offline_env(home, settings), timeout)


def minisbd_split(python: Path, model: Path, paragraphs: list[str], *, home: Path, timeout: float = 600) -> dict:
    """MiniSBD's sentences of each paragraph with the ONNX model `model`, offline."""
    command = [str(python), str(RUNNER), "split", str(model)]
    if can_unshare():
        command = ["unshare", "-n", *command]
    return _run_json(command, paragraphs, offline_env(home), timeout)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def libretranslate(python: Path, packages: Sequence[Path], langs: Sequence[str], *, home: Path,
                   timeout: float = 300, settings: dict | None = None) -> Iterator[str]:
    """LibreTranslate serving `packages` (installed with its own argostranslate) on 127.0.0.1,
    `--load-only` `langs`, with argostranslate's `settings` (ARGOS_BEAM_SIZE, ...); yields its URL,
    stops it after. Its log is home/libretranslate.log.

    Raises:
        RuntimeError: it ended or did not answer /languages within `timeout` seconds (its log's tail).
    """
    env = offline_env(home, settings)
    # an empty package index: LibreTranslate looks for packages to download when fewer than two are
    # installed, and offline, with no index, argostranslate retries until Python's recursion limit
    index = home / "data" / "argos-translate" / "index.json"
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_text("[]\n", encoding="utf-8")
    install = "import sys\nfrom argostranslate import package\nfor p in sys.argv[1:]:\n    package.install_from_path(p)\n"
    subprocess.run([str(python), "-c", install, *map(str, packages)], check=True, env=env, timeout=timeout,
                   capture_output=True)
    port = free_port()
    log_path = home / "libretranslate.log"
    server = Path(python).parent / "libretranslate"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([str(server), "--host", "127.0.0.1", "--port", str(port), "--load-only",
                                    ",".join(langs), "--threads", "1", "--disable-web-ui"],
                                   stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"LibreTranslate ended ({process.returncode}): {log_path.read_text()[-3000:]}")
            try:
                import urllib.request

                opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                with opener.open(f"{url}/languages", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"LibreTranslate did not answer in {timeout:.0f} s: {log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def downloaded(home: Path) -> list[str]:
    """What a consumer fetched or tried to cache under `home`: MiniSBD's, stanza's and spaCy's
    model caches and argostranslate's package index (empty: it needed nothing from the network)."""
    found = []
    for pattern in ("**/minisbd/*.onnx", "**/stanza/**/*.pt", "**/index.json", "**/spacy/**/meta.json"):
        found += [str(p.relative_to(home)) for p in home.glob(pattern) if "packages" not in p.parts
                  and not (p.name == "index.json" and p.read_text(encoding="utf-8").strip() == "[]")]
    return sorted(found)


if __name__ == "__main__":  # print an environment's python (a shell convenience)
    print(env_python(sys.argv[1]))
