# distcheck — set-up and checks. `make demo` and `make test` install what they need on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.distcheck-installed
# CI and laptops get the CPU wheel of torch; users with GPUs bring their own torch (it is kept).
TORCH_SPEC ?= torch==2.13.0

.PHONY: install test lint typecheck pytest demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

lint: $(STAMP)
	$(VENV)/bin/ruff check server tests examples bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

pytest: $(STAMP)
	$(PY) -m pytest

test: lint typecheck pytest

demo: $(STAMP)
	$(PY) -m examples.demo

bench: $(STAMP)
	$(PY) bench/runtime_overhead.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
