# The course's commands. `make help` lists them.
#
# Python: the course's own .venv when there is one; otherwise python3 when it already has
# torch, triton and pyyaml (a GPU machine with no network); otherwise a .venv is made and filled
# from requirements.txt (CPU torch and Triton's interpreter) the first time a target needs it.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PUZZLE ?=
FILE ?=
DIR ?= submissions
ARGS ?=
TUTORIAL ?=

HAVE_SYSTEM = $(shell python3 -c "import torch, triton, yaml" >/dev/null 2>&1 && echo yes)
# a GPU machine without network: python3 has torch, triton, pyyaml, matplotlib and pytest, but no
# Jupyter or ruff; `make test` runs there with what it has (the notebook tests say what they skip)
HAVE_SYSTEM_DEV = $(shell python3 -c "import torch, triton, yaml, pytest, matplotlib" >/dev/null 2>&1 && echo yes)
VENV_PY := .venv/bin/python

ifneq ($(wildcard $(VENV_PY)),)
  PY := $(VENV_PY)
  DEV_PY := $(VENV_PY)
else
  PY := $(if $(HAVE_SYSTEM),python3,$(VENV_PY))
  DEV_PY := $(if $(HAVE_SYSTEM_DEV),python3,$(VENV_PY))
endif

# said before make's own "*** [Makefile:N: target] Error 2" line when a target is run without PUZZLE
NO_PUZZLE = make's own line below, ending in Error 2, only repeats that no puzzle was given: the Makefile is fine.

.PHONY: help check solutions notebooks test test-all test-fast lint lab env env-dev hint progress grade grade-slurm doctor html bench profile gpu-run map

help: ## list the targets
	@echo "Triton puzzles: make <target> [PUZZLE=N] [FILE=path]"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  %-12s %s\n", $$1, $$2}'

# The first target that needs .venv makes it, in steps that say what they do: pip's own lines show the downloads.
$(VENV_PY):
	@echo "Setting up .venv, once: CPU torch, Triton's interpreter, numpy, pyyaml and matplotlib."
	@echo "It took 35 s in a trial on 2 cores with a fast network, downloads included (bench/results/2026-12-06-cpu-setup/); the steps follow."
	@echo "[1/3] making the virtual environment .venv"
	@python3 -m venv .venv
	@echo "[2/3] upgrading pip"
	@.venv/bin/python -m pip install --quiet --upgrade pip
	@echo "[3/3] installing requirements.txt (pip lists what it downloads and installs)"
	@.venv/bin/python -m pip install --progress-bar on -r requirements.txt || { rm -rf .venv; \
	  echo "The install failed (pip says why above); .venv is removed, so the next make starts it again."; exit 1; }
	@echo ".venv is ready."

.venv/.dev: requirements-dev.txt requirements.txt | $(VENV_PY)
	@echo "Installing the development tools of requirements-dev.txt into .venv, once (Jupyter's converters,"
	@echo "pytest, ruff): usually about 20 s on 2 cores, longer on a slow network; pip lists what it installs."
	@.venv/bin/python -m pip install --progress-bar on -r requirements-dev.txt
	@touch $@
	@echo "The development tools are installed."

env: $(if $(filter $(VENV_PY),$(PY)),$(VENV_PY))

env-dev: $(if $(filter $(VENV_PY),$(DEV_PY)),.venv/.dev)

check: env ## grade one puzzle: make check PUZZLE=N [FILE=path.py|notebook.ipynb]
	@if [ -z "$(PUZZLE)" ]; then echo "Say which puzzle: make check PUZZLE=1 (see the table in README.md). $(NO_PUZZLE)"; exit 2; fi
	@CHECKS_MAKE_LEVEL=$(MAKELEVEL) $(PY) -m checks $(PUZZLE) $(if $(FILE),--file "$(FILE)") $(ARGS)

map: env ## draw where your kernel reads and writes, beside the answer key: make map PUZZLE=N [FILE=path]
	@if [ -z "$(PUZZLE)" ]; then echo "Say which puzzle: make map PUZZLE=9 (see the table in README.md). $(NO_PUZZLE)"; exit 2; fi
	@CHECKS_MAKE_LEVEL=$(MAKELEVEL) $(PY) -m checks.learner.maps $(PUZZLE) $(if $(FILE),--file "$(FILE)") $(ARGS)

solutions: env ## grade every answer key (must pass) and known-wrong kernel (must fail)
	@$(PY) -m checks.instructor.solutions $(ARGS)

notebooks: env ## regenerate notebooks/*.ipynb and the README table; keeps notebooks with your answers unless FORCE=1
	@$(PY) -m checks.authoring.build $(if $(FORCE),--force)

XDIST = $(shell $(DEV_PY) -c "import xdist" >/dev/null 2>&1 && echo "-n 2 --dist loadgroup")
RUFF = $(shell $(DEV_PY) -m ruff --version >/dev/null 2>&1 && echo yes)

# the tests `make test` runs, as a pytest -m expression (`make test-all`: every one)
MARKS ?= not exhaustive
# The course's modules compiled to bytecode once, before the suite: hundreds of processes it starts import them, and
# where PYTHONDONTWRITEBYTECODE is set (container images often set it) each would compile them again (0.13 s each).
BYTECODE = $(DEV_PY) -m compileall -q -x 'submissions/broken/' checks tests solutions bench >/dev/null
test: env-dev ## run the test suite (what CI runs)
	$(DEV_PY) -m checks.authoring.build --check
	$(if $(RUFF),$(MAKE) --no-print-directory lint,@echo "ruff is not installed here: lint skipped")
	@$(BYTECODE)
	$(DEV_PY) -m pytest $(XDIST) -q -m "$(MARKS)" $(ARGS)

test-all: env-dev ## every test: also every known-wrong kernel beside one of the same rules (or rejected by values alone), and the tampering attacks in started processes
	@$(BYTECODE)
	$(DEV_PY) -m pytest $(XDIST) -q $(ARGS)

test-fast: env-dev ## the fast tests only (no grading processes), in well under a minute
	$(DEV_PY) -m pytest -q -m "not slow" -p no:xdist $(ARGS)

lint: env-dev ## ruff over the code, and the grader's import contracts (pyproject.toml: no circle, nothing upward)
	$(DEV_PY) -m ruff check checks solutions tests bench
	$(DEV_PY) -m ruff format --check checks tests bench
	$(DEV_PY) -c "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"

# Jupyter refuses to start as root without --allow-root (a container, a cloud VM): pass it there.
LAB_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)

lab: env ## open the notebooks in JupyterLab (installs JupyterLab alone into .venv the first time): make lab [ARGS=...]
	@$(PY) -c "import jupyterlab" 2>/dev/null || { echo "Installing JupyterLab (once)..."; $(PY) -m pip install --quiet jupyterlab; }
	$(PY) -m jupyter lab notebooks/ $(LAB_ROOT) $(ARGS)

hint: env ## show the next hint for a puzzle: make hint PUZZLE=N
	@if [ -z "$(PUZZLE)" ]; then echo "Say which puzzle: make hint PUZZLE=1. $(NO_PUZZLE)"; exit 2; fi
	@$(PY) -m checks.learner.hints $(PUZZLE) $(ARGS)

progress: env ## your table of puzzles: passed or not, best GPU ratio
	@$(PY) -m checks.learner.progress

grade: env ## instructors: grade a folder of submissions: make grade DIR=submissions/
	@$(PY) -m checks.instructor.classroom "$(DIR)" $(ARGS)

grade-slurm: env ## instructors: grade a folder on a Slurm cluster: make grade-slurm DIR=... ARGS="--gpus 8"
	@$(PY) -m checks.instructor.slurm "$(DIR)" $(ARGS)

doctor: env ## check this machine: versions, GPU or interpreter, the numpy pitfall, a tiny kernel
	@$(PY) -m checks.learner.doctor

html: env-dev ## render the notebooks to HTML under build/html for reading without Jupyter
	@$(DEV_PY) -m checks.instructor.html

bench: env ## GPU: the answer key against torch over a sweep of sizes (table, CSV, plots) [TUTORIAL=06-fused-attention.py]
	@$(PY) -m checks.instructor.bench $(if $(TUTORIAL),--tutorial "$(TUTORIAL)") $(ARGS)

profile: env ## GPU: each kernel's time, yours beside the key and the baseline, % of peak: make profile PUZZLE=N [FILE=path]
	@if [ -z "$(PUZZLE)" ]; then echo "Say which puzzle: make profile PUZZLE=4 (see the table in README.md). $(NO_PUZZLE)"; exit 2; fi
	@CHECKS_MAKE_LEVEL=$(MAKELEVEL) $(PY) -m bench profile $(PUZZLE) $(if $(FILE),--file "$(FILE)") $(ARGS)

gpu-run: env ## GPU machine: make solutions in shards, tampering, latency, into bench/results/ (ARGS="--shards '1 2|3' --dry-run")
	@$(PY) -m bench gpu-run $(ARGS)
