# distcheck — set-up and checks. `make demo` and `make test` install what they need on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.distcheck-installed
# The real third-party models (AIMNet2, MACE, SchNet) that tests/server/real validates; not needed for the demo.
EXTRAS_STAMP := $(VENV)/.distcheck-extras-installed
# CI and laptops get the CPU wheel of torch; users with GPUs bring their own torch (it is kept).
TORCH_SPEC ?= torch==2.13.0

.PHONY: install test test-fast pytest-fast lint typecheck pytest demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

$(EXTRAS_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e '.[aimnet,mace,pyg]'
	touch $@

lint: $(STAMP)
	$(VENV)/bin/ruff check server tests examples bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

pytest: $(STAMP) $(EXTRAS_STAMP)
	$(PY) -m pytest

test: lint typecheck pytest test-extension test-e2e

# the fast tier (under 5 minutes on two cores): lint, types, TS unit tests and the Python tests that start no process
test-fast: lint typecheck pytest-fast test-extension

# the Python tests not marked gpu or procs; TEST_TIER_DISTCHECK=fast fails any that starts a process (docs/testing.md)
pytest-fast: $(STAMP) $(EXTRAS_STAMP)
	TEST_TIER_DISTCHECK=fast $(PY) -m pytest -m "not gpu and not procs" -p no:cacheprovider

demo: $(STAMP)
	$(PY) -m examples.demo

bench: $(STAMP)
	$(PY) bench/runtime_overhead.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# ---- VS Code extension (TypeScript client in extension/, tests in tests/extension and tests/e2e)
.PHONY: node-deps test-extension test-e2e package
NPM_STAMP := node_modules/.distcheck-npm-ci

# npm ci when node_modules is missing or package.json / the lock changed
$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

node-deps: $(NPM_STAMP)

# type check, lint, unit tests (report → HTML and escaping, status text, target picking, interpreter order)
test-extension: $(NPM_STAMP)
	npm run typecheck
	npm run lint
	npm run test:unit

# the Python wheel and the .vsix, both under version control's ignore rules (dist/, *.vsix)
package: $(STAMP) $(NPM_STAMP)
	$(PY) -m pip wheel . -w dist --no-deps --quiet
	npm run package

# real VS Code (code-server 4.100.3 + Debian Chromium, installed by tests/e2e/setup.sh, apt-get as root)
# driven by playwright-core; screenshots and logs in tests/e2e/artifacts/. Fails when it cannot run.
# every tests/e2e/*.e2e.ts, as package.json's test:e2e lists them (one list, kept there)
test-e2e: $(STAMP) $(NPM_STAMP)
	npm run test:e2e
