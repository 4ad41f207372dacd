#!/usr/bin/env python3
"""A formatted .docx of about 50 pages through POST /translate_file, against the same text as a
.txt (docs/performance.md, "Documents"): sentences/s of each, and the ratio.

The .docx is made from the Multi30k German test sets (test_2016_flickr, then val: about 2,000
sentences, 1,600 of them one paragraph each) with python-docx: a bold and an italic run in some
paragraphs, a 2x2 table every 80 paragraphs, a header and a footer; 32 paragraphs a page (for
--pages 50, LibreOffice lays it out on 50 pages). The .txt
holds the very paragraphs the .docx sends to the model (documents.read_document(...).sentences),
one a line. `attnmt serve RUN` is started on 127.0.0.1; each file is sent --repeats times,
alternately, and each time is from the upload to the answer (the URL of the stored translation).

    benchmarks/speed/bench_documents.py RUN_OR_EXPORT [--repeats 3] [--pages 50] [--json out.json]
"""

from __future__ import annotations

import argparse
import gzip
import io
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import command, environment, make_report, write_report

REPO = Path(__file__).resolve().parents[2]
PARAGRAPHS_PER_PAGE = 32  # single-spaced, no space between paragraphs: LibreOffice lays 1,600 out on 50 pages


def multi30k_sentences(folder: Path) -> list[str]:
    lines = []
    for split in ("test_2016_flickr", "val"):
        with gzip.open(folder / f"{split}.de.gz", "rt", encoding="utf-8") as f:
            lines.extend(line.strip() for line in f if line.strip())
    return lines


def make_docx(sentences: list[str], pages: int, seed: int = 0) -> bytes:
    """About `pages` pages of formatted paragraphs (see the module docstring)."""
    import docx

    rng = random.Random(seed)
    document = docx.Document()
    document.styles["Normal"].paragraph_format.space_after = 0
    document.sections[0].header.paragraphs[0].text = "Bildbeschreibungen aus Multi30k"
    document.sections[0].footer.paragraphs[0].text = "Testdaten, nicht zur Veröffentlichung"
    wanted = pages * PARAGRAPHS_PER_PAGE
    pool = (sentences * (wanted // len(sentences) + 1))[:wanted]
    i = 0
    while i < len(pool):
        if i and i % 80 == 0 and i + 4 <= len(pool):  # a table of four sentences
            table = document.add_table(rows=2, cols=2)
            for k, cell in enumerate(c for row in table.rows for c in row.cells):
                cell.text = pool[i + k]
            i += 4
            continue
        words = pool[i].split()
        paragraph = document.add_paragraph()
        marked = {rng.randrange(len(words)): "bold"} if i % 3 == 0 and len(words) > 2 else {}
        if i % 5 == 0 and len(words) > 4:
            marked[rng.randrange(len(words))] = "italic"
        text = []
        for k, word in enumerate(words):
            if k in marked:
                if text:
                    paragraph.add_run(" ".join(text) + " ")
                    text = []
                run = paragraph.add_run(word)
                setattr(run, marked[k], True)
                if k + 1 < len(words):
                    paragraph.add_run(" ")
            else:
                text.append(word)
        if text:
            paragraph.add_run(" ".join(text))
        i += 1
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def serve(run: str, port: int, extra: list[str]) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), PYTHONUNBUFFERED="1")
    server = subprocess.Popen([sys.executable, "-m", "attnmt", "serve", run, "--port", str(port), "--max-sentences",
                               "10000", "--file-limit-kb", "1000", "--max-files", "100", *extra],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"attnmt serve exited with {server.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.2)
    server.terminate()
    raise RuntimeError("attnmt serve did not answer /health in 600 s")


def send(url: str, name: str, data: bytes, source: str, target: str) -> float:
    start = time.perf_counter()
    r = httpx.post(url + "/translate_file", files={"file": (name, data)}, data={"source": source, "target": target},
                   timeout=3600)
    seconds = time.perf_counter() - start
    if r.status_code != 200:
        raise RuntimeError(f"{name}: {r.status_code} {r.text[:300]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    from attnmt.documents import read_document

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run or an export, served with `attnmt serve`")
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--source", default="de")
    parser.add_argument("--target", default="en")
    parser.add_argument("--data", default=os.environ.get("ATTNMT_DATA", str(REPO.parent / "shared/data/multi30k")))
    parser.add_argument("--serve-args", default="", help="more `attnmt serve` arguments, e.g. '--engine ctranslate2'")
    parser.add_argument("--keep", default=None, help="a folder to keep the .docx and the .txt in")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    docx_bytes = make_docx(multi30k_sentences(Path(args.data)), args.pages)
    sentences = read_document(docx_bytes, ".docx").sentences
    txt_bytes = ("\n".join(sentences) + "\n").encode("utf-8")
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        (Path(args.keep) / "multi30k.docx").write_bytes(docx_bytes)
        (Path(args.keep) / "multi30k.txt").write_bytes(txt_bytes)
    print(f"{len(sentences)} paragraphs; .docx {len(docx_bytes):,} bytes, .txt {len(txt_bytes):,} bytes", flush=True)

    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = serve(args.run, port, args.serve_args.split())
    url = f"http://127.0.0.1:{port}"
    times: dict[str, list[float]] = {".txt": [], ".docx": []}
    try:
        send(url, "warm.txt", "\n".join(sentences[:64]).encode(), args.source, args.target)  # warm-up
        for repeat in range(args.repeats):
            for suffix, data in ((".txt", txt_bytes), (".docx", docx_bytes)):
                seconds = send(url, "multi30k" + suffix, data, args.source, args.target)
                times[suffix].append(seconds)
                print(f"repeat {repeat + 1}: {suffix:5} {seconds:7.2f} s  {len(sentences) / seconds:7.1f} sentences/s",
                      flush=True)
    finally:
        server.terminate()
        server.wait(timeout=60)
    results = []
    for suffix, values in times.items():
        median = statistics.median(values)
        results.append({"kind": "translate_file", "format": suffix, "sentences": len(sentences),
                        "seconds": values, "median_s": median, "sentences_per_s": len(sentences) / median})
    ratio = results[1]["sentences_per_s"] / results[0]["sentences_per_s"]
    for row in results:
        print(f"{row['format']:5}: {row['sentences_per_s']:.1f} sentences/s (median of {len(row['seconds'])})")
    print(f".docx / .txt: {ratio:.1%} (target: at least 80%)")
    if args.json:
        write_report(args.json, make_report("bench_documents", command=command(__file__, argv), environment=environment(),
                                            settings=vars(args), results=results, notes=[f"docx/txt = {ratio:.4f}"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
