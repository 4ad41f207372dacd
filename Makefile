# attnmt: set-up, demo, tests. Everything runs in a local virtual environment (.venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Where torch comes from. The version pin does not choose between the CPU and the CUDA build:
# on Linux, PyPI's torch is the CUDA build (GBs of NVIDIA libraries). For the CPU-only build, name
# PyTorch's CPU wheel index:   make setup TORCH_INDEX=https://download.pytorch.org/whl/cpu
# Empty (the default), pip uses its own configured index, as it does for everything else.
TORCH_VERSION ?= 2.13.0
TORCH_INDEX ?=
# Read Multi30k from a local folder when one is there (offline machines); else download it.
ATTNMT_DATA ?= $(if $(wildcard ../shared/data/multi30k/SHA256SUMS),$(abspath ../shared/data/multi30k),)
export ATTNMT_DATA

.PHONY: setup demo test test-seeds test-all bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, from TORCH_INDEX when given, so that attnmt's "torch>=2.2" finds it installed.
	$(BIN)/python -m pip install --quiet torch==$(TORCH_VERSION) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/attnmt demo

# The suite runs on every core (pytest-xdist); TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= auto
test: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

# The tests that assert what a small training learned, again with another training seed: a bound
# that holds only for seed 1's luck on one CPU's arithmetic fails here on any machine (CI runs it).
test-seeds: setup
	ATTNMT_TEST_SEED=2 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m 'learned and not slow and not gpu'

test-all: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m ''

# Speed: attnmt next to the tutorial-style reference (docs/performance.md). Decode a trained run
# with BENCH_ARGS='--decode-checkpoint runs/NAME ...'.
BENCH_ARGS ?= --config configs/quickstart_rnn.yaml --device cpu --steps 8 --warmup-steps 2 --decode-sentences 200
bench: setup
	$(BIN)/python benchmarks/speed/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) runs build dist src/*.egg-info

# ---- the GPU suite (docs/gpu.md): only the checkout travels to a GPU machine, so its wheels
# and data go inside it, in git-ignored folders.
# Wheels the GPU machine lacks (it is Python 3.12 with torch, sacrebleu, sentencepiece, regex,
# click, joblib, tqdm, pyyaml): sacremoses, for Python 3.12 manylinux x86_64.
GPU_WHEELS ?= sacremoses==0.2.0
.PHONY: gpu-wheels gpu-data gpu-ready
gpu-wheels:
	mkdir -p .whl
	$(PYTHON) -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
		-d .whl $(GPU_WHEELS)

# Multi30k into data/multi30k from ATTNMT_DATA (benchmarks/gpu/gpu_suite.sh reads it from there).
gpu-data:
	@test -f "$(ATTNMT_DATA)/SHA256SUMS" || { echo "gpu-data: set ATTNMT_DATA to a folder holding Multi30k (SHA256SUMS)"; exit 1; }
	mkdir -p data/multi30k
	cp "$(ATTNMT_DATA)"/* data/multi30k/

gpu-ready: gpu-wheels gpu-data
