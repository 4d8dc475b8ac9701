# The course's two commands: `make lab` (install, open the course) and `make test` (install, run
# every test and every notebook in quick mode). Both install from nothing and are idempotent:
# an install step reruns only when pyproject.toml changes or its virtual environment is missing.
#
# Two virtual environments, so that a learner's JupyterLab holds the course and nothing else:
#   .venv-lab  make lab: the package and what the notebooks import (`pip install -e .[lab]`)
#   .venv      make test, images, bench: the package with `.[dev]` (tests, lint, nbgrader,
#              playwright); make student and badges: `.[instructor]` (nbgrader)

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
LAB_VENV ?= .venv-lab
PY := $(VENV)/bin/python
LAB_PY := $(LAB_VENV)/bin/python
STAMP := $(VENV)/.convs2s-installed
INSTRUCTOR_STAMP := $(VENV)/.convs2s-instructor
LAB_STAMP := $(LAB_VENV)/.convs2s-lab
# The CPU build of torch that some machines keep on local disk. Installing it first means the
# package's range (torch>=2.2) is already met, so pip does not pull a multi-GB CUDA build.
TORCH_PIN ?= torch==2.13.0
PORT ?= 8888
# Jupyter refuses to run as root without this flag (containers, Colab-like VMs).
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
# pip's "location is ignored" chatter about absent local mirrors hides real errors; drop it.
# (Braced, so that a failing pip still fails the pipeline under pipefail.)
QUIET_PIP := { grep -v "is ignored: it is neither a file nor a directory" || true; }

# The course as a static website, from the notebooks as committed with their stored outputs
# (no notebook runs; onnxruntime-web comes from npm, SITE_NPM below): Sphinx + myst-nb +
# sphinx-book-theme, see tools/site/.
# Open $(SITE)/index.html. tests/site_and_tools/test_site.py checks it in headless Chromium.
SITE := build/site
SITE_RECORD := build/site.json
# onnxruntime-web, which the site vendors for notebook 06's translator, from the npm registry at
# the version tools/site/package-lock.json pins (into tools/site/node_modules, ignored by git).
SITE_NPM := tools/site/node_modules/.convs2s-installed

# A relative CONVS2S_DATA_DIR means relative to where `make` runs (the repository root), not to
# the folder a notebook's kernel runs in (notebooks/): export it as an absolute path.
ifneq ($(strip $(CONVS2S_DATA_DIR)),)
override CONVS2S_DATA_DIR := $(shell $(PYTHON) -c 'import os, sys; \
	print(os.path.abspath(os.path.expanduser(sys.argv[1])))' '$(subst ','\'',$(CONVS2S_DATA_DIR))')
export CONVS2S_DATA_DIR
endif

.PHONY: help install lab-install test unit notebooks lint lab student images badges bench \
	bench-gpu clean site site-images

help:
	@echo "make lab    install the course into $(LAB_VENV) and open it in JupyterLab"
	@echo "make test   install into $(VENV) (.[dev]), run ruff, unit tests and every notebook"
	@echo "make student nbgrader student versions of the exercises -> coursework/release/"
	@echo "             (a class's own numbers from a random secret; VARIANT=<name> to choose)"
	@echo "make images screenshots of the widgets into images/ (needs chromium)"
	@echo "make site   the course as a static website (stored outputs; npm fetches onnxruntime-web once) -> $(SITE)/"
	@echo "make badges rewrite every Colab link from [project.urls] Repository in pyproject.toml"
	@echo "make bench  the CPU-sized benchmarks (~15 min), then the GPU ones if there is a GPU"

# $(call install_into,VENV,PIP SPEC,STAMP): the local CPU torch first (when there is one), then
# the package, editable, with the extras in SPEC; the stamp records that it is done.
define install_into
	@if $(1)/bin/python -m pip download -q --no-index --no-deps -d $(1)/.probe \
			"$(TORCH_PIN)" >/dev/null 2>&1; then \
		echo "installing $(TORCH_PIN) (CPU build from local disk) into $(1) first"; \
		$(1)/bin/python -m pip install -q "$(TORCH_PIN)" 2>&1 | $(QUIET_PIP); \
	else \
		echo "no local $(TORCH_PIN) wheel here: torch comes from the index with the package"; \
	fi
	rm -rf $(1)/.probe
	$(1)/bin/python -m pip install -q -e "$(2)" 2>&1 | $(QUIET_PIP)
	touch $(3)
endef

# Each virtual environment this Makefile makes carries a mark, so that `make clean` removes
# only those: never one a user made (or named with VENV=...) for their own packages.
MADE_MARK := .convs2s-made

$(PY):
	$(PYTHON) -m venv $(VENV)
	touch $(VENV)/$(MADE_MARK)

$(LAB_PY):
	$(PYTHON) -m venv $(LAB_VENV)
	touch $(LAB_VENV)/$(MADE_MARK)

# Tests, lint, notebooks in CI, screenshots, benchmarks (nbgrader too: the coursework tests).
$(STAMP): pyproject.toml | $(PY)
	$(call install_into,$(VENV),.[dev],$(STAMP))

# The instructor's tools (nbgrader) for make student.
$(INSTRUCTOR_STAMP): pyproject.toml | $(PY)
	$(call install_into,$(VENV),.[instructor],$(INSTRUCTOR_STAMP))

# What a learner needs and nothing else (the package, JupyterLab and the widgets' front end):
# the lab shows no nbgrader menus or formgrader.
$(LAB_STAMP): pyproject.toml | $(LAB_PY)
	$(call install_into,$(LAB_VENV),.[lab],$(LAB_STAMP))

install: $(STAMP)

lab-install: $(LAB_STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks tools

# Test workers (pytest-xdist): one per core this process may use, at most 4 (TEST_JOBS=1: one
# process); each test file runs whole in one worker (--dist loadfile: a file's module fixtures,
# such as the Colab-like environment, are made once). With workers, every process the tests
# start gets one OpenMP thread (OMP_NUM_THREADS=1): two threads each would wait on the other
# worker's busy core (fresh clone, 2 cores: 836 s with this, 1,520 s without, 1,355 s in one
# process; benchmarks/RESULTS.md).
TEST_JOBS ?= $(shell $(PYTHON) -c 'import os; print(min(4, len(os.sched_getaffinity(0))))')
XDIST = $(if $(filter-out 0 1,$(TEST_JOBS)), -n $(TEST_JOBS) --dist loadfile)

# --durations: the 25 slowest tests at the end, so that every run (CI's too) shows where the
# time goes. Under make test the tests check the site make site has just built (its record:
# $(SITE_RECORD); tests/shared_site.py) instead of building one each; make unit alone builds its
# own.
unit: $(STAMP) $(SITE_NPM)
	CONVS2S_QUICK=1 $(if $(TEST_SITE_RECORD),CONVS2S_TEST_SITE_RECORD=$(TEST_SITE_RECORD) )$(if $(XDIST),OMP_NUM_THREADS=1 )$(PY) -m pytest tests -q -rs --durations=25$(XDIST)

# Every notebook under nbval in this environment (.venv, ipywidgets 8), from the repository.
# Not part of make test: there tests/site_and_tools/test_colab_like.py runs every notebook top to
# bottom, alone, from the wheel in a fresh environment (as on Colab), and moves each widget;
# test_browser.py runs notebooks 01, 03, 05 and 06 in JupyterLab. Running them here too cost
# make test about 75 s on a 2-core machine.
notebooks: $(STAMP)
	CONVS2S_QUICK=1 MPLBACKEND=Agg $(if $(XDIST),OMP_NUM_THREADS=1 )$(PY) -m pytest --nbval-lax --nbval-current-env \
		-p no:cacheprovider notebooks -q$(XDIST)

test: lint site unit
test: TEST_SITE_RECORD = $(SITE_RECORD)

lab: $(LAB_STAMP)
	$(LAB_VENV)/bin/jupyter lab --notebook-dir=notebooks --port=$(PORT) $(ROOT_FLAG) $(LAB_ARGS)

COURSEWORK := coursework
# nbgrader runs `alembic` (gradebook migrations) from PATH, so the venv's bin goes first.
NBGRADER := PATH="$(abspath $(VENV))/bin:$$PATH" $(abspath $(VENV))/bin/nbgrader

# The student versions: course notebooks (+ coursework/hidden) -> coursework/source (instructor
# versions, solutions in) -> nbgrader generate_assignment -> coursework/release
# (+ coursework/gradebook.db, and grading.json: what autograde grades against). --clean removes
# only what an earlier run wrote there. The class's numbers for every predict and derive
# exercise (each hidden-test file's VERSIONS) come from a random secret kept in coursework/variant-secret
# (made the first time), or from VARIANT=<name> if you give one. GRADE_PRACTICE=1 gives the
# implement and debug exercises (public solutions) their points. PROJECT_DIRECTION=cs-en fixes
# the direction notebook 09's project trains (default: drawn from the class's secret).
student: $(INSTRUCTOR_STAMP)
	$(PY) -m tools.coursework --clean --out $(COURSEWORK)/source --notebooks notebooks \
		--hidden $(COURSEWORK)/hidden $(if $(VARIANT),--variant '$(subst ','\'',$(VARIANT))') \
		$(if $(GRADE_PRACTICE),--grade-practice) \
		$(if $(PROJECT_DIRECTION),--project-direction '$(subst ','\'',$(PROJECT_DIRECTION))')
	@if [ ! -f $(COURSEWORK)/sandbox_grading.py ]; then \
		echo "copying coursework/sandbox_grading.py into $(COURSEWORK) (its" \
			"nbgrader_config.py grades in a sandbox with it)"; \
		cp coursework/sandbox_grading.py $(COURSEWORK)/; fi
	cd $(COURSEWORK) && $(NBGRADER) generate_assignment "*" --force --log-level=WARN
	@echo "student versions: $(COURSEWORK)/release/ (see $(COURSEWORK)/README.md)"

# The architecture diagrams, then screenshots of the four widgets (notebooks 01, 03, 05, 06) in
# JupyterLab in headless Chromium.
images: $(STAMP) $(SITE_NPM)
	$(PY) -m convs2s.course.diagrams --out images
	@model=$$(ls notebooks/runs/05_gpu_subword/final.pt notebooks/runs/05_cpu_subword/final.pt \
		2>/dev/null | head -1); \
	if [ -n "$$model" ]; then echo "notebook 06's translator: $$model"; \
	else echo "notebook 06's translator: the course's shipped model (convs2s.pretrained;" \
		"your own run of notebook 05 in notebooks/runs/ is used instead when there is one)"; fi; \
	CONVS2S_QUICK=1 $(PY) -m tools.screenshots --out images $${model:+--checkpoint "$$model"}
	$(PY) -m tools.site --out $(SITE)
	$(PY) -m tools.site_screenshots --site $(SITE) --out images

$(SITE_NPM): tools/site/package.json tools/site/package-lock.json
	@command -v npm >/dev/null || { echo "make site needs npm (Node.js) to install" \
		"onnxruntime-web for the site's translator: install Node.js (apt-get install npm)" >&2; \
		exit 1; }
	npm ci --prefix tools/site --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $@

site: $(STAMP) $(SITE_NPM)
	$(PY) -m tools.site --out $(SITE) --record $(SITE_RECORD)

# The README's screenshots of two of its pages (also part of `make images`).
site-images: site
	$(PY) -m tools.site_screenshots --site $(SITE) --out images

badges: $(INSTRUCTOR_STAMP)
	$(PY) -m tools.badges

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
	$(PY) benchmarks/train_step.py --preset cpu_subword --batches real --steps 20 --json $(RESULTS)/train_step_cpu_subword.json
	$(PY) benchmarks/quality.py --preset quick --device cpu --overwrite --out runs/bench_quick \
		--json $(RESULTS)/quality_quick.json
	$(PY) benchmarks/ci_time.py --json $(RESULTS)/ci_time.json
	@if $(HAS_GPU); then $(MAKE) --no-print-directory bench-gpu; \
	else echo "no GPU here: the GPU rows keep their last measurement (benchmarks/RESULTS.md)"; fi

# One GPU: the gpu preset's memory (must fit a free Colab's 16 GB) and speed, decoding, quality.
bench-gpu: $(STAMP)
	mkdir -p $(RESULTS)
	$(PY) benchmarks/memory.py --preset gpu --device cuda --json $(RESULTS)/memory_gpu.json
	$(PY) benchmarks/speed.py --preset gpu --device cuda --json $(RESULTS)/speed_gpu.json
	$(PY) benchmarks/decoding.py --preset gpu --device cuda --json $(RESULTS)/decoding_gpu.json
	$(PY) benchmarks/quality.py --preset gpu --device cuda --overwrite --out runs/bench_gpu \
		--json $(RESULTS)/quality_gpu.json

clean:
	@for venv in $(VENV) $(LAB_VENV); do \
		if [ -f "$$venv/$(MADE_MARK)" ]; then echo "removing $$venv"; rm -rf "$$venv"; \
		elif [ -e "$$venv" ]; then echo "kept $$venv: this Makefile did not make it (no" \
			"$$venv/$(MADE_MARK)); remove it yourself if you want it gone"; fi; done
	rm -rf .pytest_cache .ruff_cache src/*.egg-info
