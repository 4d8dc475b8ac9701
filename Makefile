# The course's two commands: `make lab` (install, open the course) and `make test` (install, run
# every test and every notebook in quick mode). Both install into .venv from nothing and are
# idempotent: the install step reruns only when pyproject.toml changes or .venv is missing.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.convs2s-installed
# The CPU build of torch that some machines keep on local disk. Installing it first means the
# package's range (torch>=2.2) is already met, so pip does not pull a multi-GB CUDA build.
TORCH_PIN ?= torch==2.13.0
PORT ?= 8888
# Jupyter refuses to run as root without this flag (containers, Colab-like VMs).
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
# pip's "location is ignored" chatter about absent local mirrors hides real errors; drop it.
QUIET_PIP := grep -v "is ignored: it is neither a file nor a directory" || true

.PHONY: help install test unit notebooks lint lab student images badges bench bench-gpu clean

help:
	@echo "make lab    install into $(VENV) and open the course in JupyterLab"
	@echo "make test   install into $(VENV), run ruff, unit tests and every notebook (quick mode)"
	@echo "make student nbgrader student versions of the exercises -> coursework/release/"
	@echo "make images screenshots of the widgets into images/ (needs chromium)"
	@echo "make badges rewrite every Colab link from [project.urls] Repository in pyproject.toml"
	@echo "make bench  the CPU-sized benchmarks (~15 min), then the GPU ones if there is a GPU"

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	@if $(PY) -m pip download -q --no-index --no-deps -d $(VENV)/.probe "$(TORCH_PIN)" >/dev/null 2>&1; then \
		echo "installing $(TORCH_PIN) (CPU build from local disk) first"; \
		$(PY) -m pip install -q "$(TORCH_PIN)" 2>&1 | $(QUIET_PIP); \
	else \
		echo "no local $(TORCH_PIN) wheel here: torch comes from the index with the package"; \
	fi
	rm -rf $(VENV)/.probe
	$(PY) -m pip install -q -e ".[dev]" 2>&1 | $(QUIET_PIP)
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks

unit: $(STAMP)
	CONVS2S_QUICK=1 $(PY) -m pytest tests -q -rs

notebooks: $(STAMP)
	CONVS2S_QUICK=1 MPLBACKEND=Agg $(PY) -m pytest --nbval-lax --nbval-current-env \
		-p no:cacheprovider notebooks -q

test: lint unit notebooks

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --port=$(PORT) $(ROOT_FLAG) $(LAB_ARGS)

COURSEWORK := coursework
# nbgrader runs `alembic` (gradebook migrations) from PATH, so the venv's bin goes first.
NBGRADER := PATH="$(abspath $(VENV))/bin:$$PATH" $(abspath $(VENV))/bin/nbgrader

# The student versions: course notebooks -> coursework/source (instructor versions, solutions
# in) -> nbgrader generate_assignment -> coursework/release (+ coursework/gradebook.db).
student: $(STAMP)
	$(PY) -m convs2s.coursework --clean --out $(COURSEWORK)/source --notebooks notebooks
	rm -rf $(COURSEWORK)/release
	cd $(COURSEWORK) && $(NBGRADER) generate_assignment "*" --force --log-level=WARN
	@echo "student versions: $(COURSEWORK)/release/ (see $(COURSEWORK)/README.md)"

# Screenshots of the three widgets (notebooks 01, 03, 06) in JupyterLab in headless Chromium.
images: $(STAMP)
	CONVS2S_QUICK=1 $(PY) -m convs2s.screenshots --out images

badges: $(STAMP)
	$(PY) -m convs2s.badges

# The CPU-sized benchmarks (about 15 minutes on 2 cores; needs CONVS2S_DATA_DIR or the cache),
# then the GPU-sized ones where torch sees a GPU. By hand: benchmarks/quality.py --preset cpu
# (27 min) and benchmarks/train_choices.py (18 min). Each prints a table and writes JSON.
RESULTS := benchmarks/results
HAS_GPU = $(PY) -c "import sys, torch; sys.exit(not torch.cuda.is_available())"

bench: $(STAMP)
	mkdir -p $(RESULTS)
	$(PY) benchmarks/padding_ratio.py --batch-size 128 --json $(RESULTS)/padding_ratio.json
	$(PY) benchmarks/decoding.py --device cpu --json $(RESULTS)/decoding_cpu.json
	$(PY) benchmarks/memory.py --preset cpu --device cpu --json $(RESULTS)/memory_cpu.json
	$(PY) benchmarks/speed.py --preset cpu --device cpu --json $(RESULTS)/speed_cpu.json
	$(PY) benchmarks/quality.py --preset quick --device cpu --overwrite --out runs/bench_quick \
		--json $(RESULTS)/quality_quick.json
	$(PY) benchmarks/ci_time.py --json $(RESULTS)/ci_time.json
	@if $(HAS_GPU); then $(MAKE) --no-print-directory bench-gpu; \
	else echo "no GPU here: the GPU rows stay 'not yet measured on a GPU'"; fi

# One GPU: the gpu preset's memory (must fit a free Colab's 16 GB) and speed, decoding, quality.
bench-gpu: $(STAMP)
	mkdir -p $(RESULTS)
	$(PY) benchmarks/memory.py --preset gpu --device cuda --json $(RESULTS)/memory_gpu.json
	$(PY) benchmarks/speed.py --preset gpu --device cuda --json $(RESULTS)/speed_gpu.json
	$(PY) benchmarks/decoding.py --preset gpu --device cuda --json $(RESULTS)/decoding_gpu.json
	$(PY) benchmarks/quality.py --preset gpu --device cuda --overwrite --out runs/bench_gpu \
		--json $(RESULTS)/quality_gpu.json

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache src/*.egg-info
