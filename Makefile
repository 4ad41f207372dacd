# attnmt: set-up, demo, tests. Everything runs in a local virtual environment (.venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Read Multi30k from a local folder when one is there (offline machines); else download it.
ATTNMT_DATA ?= $(if $(wildcard ../shared/data/multi30k/SHA256SUMS),$(abspath ../shared/data/multi30k),)
export ATTNMT_DATA

.PHONY: setup demo test test-all bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, pinned: a bare "torch" requirement would pull a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/attnmt demo

test: setup
	$(BIN)/python -m pytest -q

test-all: setup
	$(BIN)/python -m pytest -q -m ''

# Speed: attnmt next to the tutorial-style reference (docs/performance.md). Decode a trained run
# with BENCH_ARGS='--decode-checkpoint runs/NAME ...'.
BENCH_ARGS ?= --config configs/quickstart_rnn.yaml --device cpu --steps 8 --warmup-steps 2 --decode-sentences 200
bench: setup
	$(BIN)/python benchmarks/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) runs build dist src/*.egg-info
