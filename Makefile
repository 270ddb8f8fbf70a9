# make run   — create .venv, install, serve http://127.0.0.1:8000
# make test  — create .venv with the test extras, install Chromium if missing (as root), run every test
# make bench — an edit and large API requests against /healthz, a class on one worker (alone and beside
#              the largest request in a loop), growth with T, compression (bench/RESULTS.md)
# make test-container — build the image from the Dockerfile, run it, check it from outside (minutes)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test lint browser container-engine test-container clean bench bench-quick

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python >= 3.11 is needed"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(VENV)/.installed $@

# The other ATTENTION_* settings (README, "Configuration") come from the environment.
run: $(VENV)/.installed
	ATTENTION_HOST=$(HOST) ATTENTION_PORT=$(PORT) $(BIN)/python -m app.serve

# Browser tests drive Debian's Chromium (Playwright cannot download its own browser offline).
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver fonts-dejavu-core >/dev/null; \
	else echo "chromium not found and not root: browser tests will be skipped"; fi

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .

test: $(VENV)/.installed-test browser lint
	$(BIN)/python -m pytest

# The container test uses a Docker engine if one answers, else podman with runc (debootstrap makes a
# stand-in base image where no registry is reachable); installed here when missing, as root.
container-engine:
	@if docker info >/dev/null 2>&1; then :; \
	elif command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >/dev/null; \
	else echo "no container engine and not root: container tests will be skipped"; fi

test-container: $(VENV)/.installed-test container-engine
	$(BIN)/python -m pytest -m container tests/container

# Figures for reading, not assertions: writes bench/RESULTS.md and README's Performance block.
bench: $(VENV)/.installed-test
	$(BIN)/python -m bench --readme README.md

# A few seconds, only to prove the bench still runs (tests/test_bench.py does the same).
bench-quick: $(VENV)/.installed-test
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache test-artifacts
