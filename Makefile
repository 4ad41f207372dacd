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

.PHONY: setup demo test test-all bench clean

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

test: setup
	$(BIN)/python -m pytest -q

test-all: setup
	$(BIN)/python -m pytest -q -m ''

clean:
	rm -rf $(VENV) runs build dist src/*.egg-info
