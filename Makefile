# The two commands a newcomer needs: `make demo` (the main job) and `make test` (every test).
# Both bootstrap what they need: a virtualenv in .venv and the control-plane binaries in the cache.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

LOCK := requirements.lock

.PHONY: demo test lint typecheck unit integration e2e bench cluster-binaries clean lock image image-test

# The locked runtime dependencies first, so that the tests run the versions the image ships; then the
# project and its dev tools (a lock gone stale against pyproject.toml fails a test, not the install).
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# requirements.lock: every runtime dependency at an exact version, with hashes, resolved from pyproject.toml's
# pins. The Dockerfile and `make image` install from it; tests/image checks it agrees with pyproject.toml.
lock: $(STAMP)
	CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile --quiet --generate-hashes --strip-extras \
		--no-emit-index-url --no-emit-find-links --output-file $(LOCK) pyproject.toml

# The OCI image archive build/image/arc-scaleset-VERSION-ARCH.oci.tar, from Debian packages, without Docker
# (as root; installs mmdebstrap with apt-get when missing). See README, "The container image".
image: $(STAMP)
	$(BIN)/python -m image.build

# Only the image's tests (`make test` runs them too): build or reuse the image, run it with runc.
image-test: cluster-binaries
	$(BIN)/pytest -q -p no:cacheprovider tests/image $(PYTEST_ARGS)

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
	$(BIN)/pytest -q -p no:cacheprovider --durations=25 $(PYTEST_ARGS)

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
