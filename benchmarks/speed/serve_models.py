#!/usr/bin/env python
"""Resident memory and start-up time of `attnmt serve` with the first model given, then with the
first two (docs/serving.md, "Several models"):

    benchmarks/speed/serve_models.py RUN_A RUN_B
"""
import os, re, subprocess, sys, time, socket, httpx
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"): return int(line.split()[1]) / 1024
for runs in [sys.argv[1:2], sys.argv[1:3]]:
    p = port(); t0 = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "..", "src"), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "attnmt", "serve", *runs, "--port", str(p), "--device", "cpu"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{p}/health").status_code == 200: break
        except Exception: time.sleep(0.1)
    ready = time.perf_counter() - t0
    r = rss(proc.pid)
    proc.terminate(); out = proc.communicate()[0]
    loads = re.findall(r"(\S+ \(.*?\)|language identification \(.*?\)) loaded in ([0-9.]+) s", out)
    print(len(runs), "models:", f"ready in {ready:.1f} s, RSS {r:.0f} MiB;", loads)
