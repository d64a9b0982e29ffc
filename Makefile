# The two commands a newcomer needs: `make demo` (the main job) and `make test` (every test).
# Both bootstrap what they need: a virtualenv in .venv and the control-plane binaries in the cache.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit integration e2e bench cluster-binaries clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

cluster-binaries: $(STAMP)
	$(BIN)/arc-scaleset cluster build

demo: cluster-binaries
	$(BIN)/arc-scaleset demo $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck cluster-binaries
	$(BIN)/pytest -q -p no:cacheprovider $(PYTEST_ARGS)

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit $(PYTEST_ARGS)

integration: cluster-binaries
	$(BIN)/pytest -q tests/integration $(PYTEST_ARGS)

e2e: cluster-binaries
	$(BIN)/pytest -q tests/e2e $(PYTEST_ARGS)

bench: cluster-binaries
	for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
