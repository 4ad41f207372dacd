#!/usr/bin/env bash
# Every GPU figure in one command (docs/gpu.md):
#     benchmarks/gpu/gpu_suite.sh OUT_DIR [--dry-run] [--budget-s 540] [--only tests,quality,speed] ...
# Runs from the checkout alone: wheels from .whl/ (make gpu-wheels), Multi30k from data/multi30k
# (make gpu-data), attnmt from src/. Without CUDA it prints one line and exits 0.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-python3}"
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
    echo "usage: benchmarks/gpu/gpu_suite.sh OUT_DIR [--dry-run] [--budget-s S] [--only STAGES] [--rnn-quality]" >&2
    exit 2
fi
DRY=0
for arg in "$@"; do [ "$arg" = "--dry-run" ] && DRY=1; done
if [ "$DRY" = 0 ] && ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu_suite: no CUDA device here (torch.cuda.is_available() is False): nothing to run"
    exit 0
fi
# Packages the GPU machine lacks travel as wheels in .whl/ (installed once into .whl/site).
if compgen -G ".whl/*.whl" > /dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target .whl/site .whl/*.whl
    export PYTHONPATH="$PWD/.whl/site${PYTHONPATH:+:$PYTHONPATH}"
fi
if [ -f data/multi30k/SHA256SUMS ]; then
    export ATTNMT_DATA="$PWD/data/multi30k"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" benchmarks/gpu/gpu_suite.py "$@" --python "$PYTHON"
