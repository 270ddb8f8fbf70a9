# make run   — create .venv, install (requirements.lock), serve http://127.0.0.1:8000
# make check — ruff and the tests that need no browser, server or kernel (about a minute and a half)
# make test  — create .venv with the test extras (requirements-test.lock), install Chromium and redis-server if
#              missing (as root), run every test (on TEST_WORKERS=2 processes), the sweeps over every preset,
#              language or screen on samples (tests/conftest.py) and the slow tests left out (under eight minutes)
# make test-all — every test: every preset in every sweep, the slow tests, Schemathesis's coverage phase (CI)
# make lock  — write the lock files again: pyproject.toml's dependencies (after changing one), and uv's newest release
# make messages — extract every message (app, templates, scripts) into app/locales/messages.pot and merge it
#              into each language's catalogue (docs/translating.md); the catalogues are compiled by run and test
# make bench — an edit and large API requests against /healthz, a class on one worker (alone and beside
#              the largest request in a loop), 300 students following a teacher's steps by their event
#              streams (in memory and with Redis), growth with T, compression (bench/RESULTS.md)
# make test-container — build the image from the Dockerfile, run it, check it from outside (minutes)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run check test test-all lint bytecode lock messages catalogues browser services container-engine test-container clean bench bench-quick bench-wrk

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python >= 3.11 is needed"'
	$(PYTHON) -m venv $(VENV)

# uv installs the lock files (a second from its cache, where pip took twenty); it is itself pinned with its
# hashes in requirements-setup.lock, and installed by the venv's own pip.
SETUP_LOCK := requirements-setup.lock
UV := $(BIN)/uv

$(UV): $(SETUP_LOCK) | $(BIN)/python
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r $(SETUP_LOCK)
	touch $@

# Every dependency at the exact version and hashes of the lock files (`make lock` writes them from
# pyproject.toml), exactly those (--no-deps: the lock is complete, and leaves out what
# requirements-excludes.txt names); the project itself is installed on top, without resolving anything again.
LOCK      := requirements.lock
TEST_LOCK := requirements-test.lock

# Compiled to bytecode as they are installed: where PYTHONDONTWRITEBYTECODE is set, no process would keep what it
# compiled, and every server and test process would compile every module it imports again.
INSTALL := $(UV) pip install --quiet --python $(BIN)/python --no-deps --compile-bytecode

$(VENV)/.installed: pyproject.toml $(LOCK) | $(UV)
	$(INSTALL) --require-hashes -r $(LOCK)
	$(INSTALL) -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(TEST_LOCK) | $(UV)
	$(INSTALL) --require-hashes -r $(TEST_LOCK)
	$(INSTALL) -e .
	touch $(VENV)/.installed $@

# Resolve pyproject.toml's dependencies again, for every platform and Python >= 3.11 (the image runs
# 3.11, as the tests do), with the hashes of every file, and uv's newest release (requirements-setup.lock):
# run after changing a dependency, and commit the three files.
lock: | $(UV)
	$(UV) pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes --excludes requirements-excludes.txt --quiet -o $(LOCK)
	$(UV) pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes --excludes requirements-excludes.txt --quiet \
		--extra test -o $(TEST_LOCK)
	echo uv | $(UV) pip compile - --universal --python-version 3.11 --generate-hashes \
		--quiet -o $(SETUP_LOCK)

# The other ATTENTION_* settings (docs/configuration.md) come from the environment. One BLAS thread, as in the
# image: a request's matrix products are small, and BLAS threads spinning beside the server's only slow it.
run: $(VENV)/.installed catalogues
	OPENBLAS_NUM_THREADS=1 ATTENTION_HOST=$(HOST) ATTENTION_PORT=$(PORT) $(BIN)/python -m app.serve

# The page's languages (app/i18n.py): one gettext catalogue each, app/locales/<lang>/LC_MESSAGES/messages.po,
# read as it is when the app starts (nothing to compile); `catalogues` reads each one, as the app will, and stops
# on a broken one. `make messages` extracts the English messages of the app's Python (_(), N_()), the templates
# (_(), {% trans %}) and the scripts (t()) and merges them into each catalogue: a new or changed message is then
# missing or fuzzy there until translated (tests/i18n fail on both).
LOCALES := app/locales

catalogues: $(VENV)/.installed
	$(BIN)/python -c 'from app.i18n import load_catalogues; load_catalogues()'

messages: $(VENV)/.installed-test
	$(BIN)/pybabel extract -F babel.cfg -k t -k N_ --no-wrap --sort-by-file -o $(LOCALES)/messages.pot .
	$(BIN)/pybabel update -i $(LOCALES)/messages.pot -d $(LOCALES) --no-wrap --ignore-obsolete

# Browser tests drive Debian's Chromium (Playwright cannot download its own browser offline), with a font for the
# Chinese page (a student's computer in a Chinese class has one; this machine needs one to see it).
browser:
	@if command -v chromium >/dev/null 2>&1 && [ -n "$$(fc-list :lang=zh 2>/dev/null)" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver fonts-dejavu-core \
			fonts-wqy-microhei >/dev/null; \
	else echo "chromium not found and not root: browser tests will be skipped"; fi

# Live classes with REDIS_URL keep their rooms in Redis: the tests start Debian's redis-server on a
# free port of their own (tests/redis_server.py), never a fake; the faults' tests and bench (bench/faults.py)
# put Debian's nginx with deploy/nginx.conf in front of two app servers.
services:
	@if { command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ]; } && [ -x /usr/sbin/nginx ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server nginx >/dev/null; \
	else echo "redis-server or nginx not found and not root: the tests that need them will be skipped"; fi

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .

# The suite on TEST_WORKERS processes (pytest-xdist; a test file stays on one worker, with its own browser, app
# server and Redis on free ports). TEST_WORKERS=0 runs it in this process. What each target leaves out is said in
# tests/conftest.py: `test` runs a sweep over every preset on one of them and leaves the slow tests to `test-all`;
# `check` leaves out every test that drives a browser, starts a server or runs a kernel too.
TEST_WORKERS ?= 2
PYTEST := OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

check: $(VENV)/.installed-test catalogues lint bytecode
	$(PYTEST) -q -m "not browser and not server and not kernel"

test: $(VENV)/.installed-test catalogues browser services lint bytecode
	$(PYTEST)

test-all: $(VENV)/.installed-test catalogues browser services lint bytecode
	$(PYTEST) --full

# The project's own modules, compiled once (half a second) for the tens of processes a run starts.
bytecode: $(VENV)/.installed-test
	$(BIN)/python -m compileall -q -j 0 app bench tests

# The container test uses a Docker engine if one answers, else podman with runc (debootstrap makes a
# stand-in base image where no registry is reachable); installed here when missing, as root. The
# replicas sharing a class need Debian's redis-server, and nginx runs deploy/nginx.conf in front of them.
container-engine:
	@if docker info >/dev/null 2>&1; then :; \
	elif command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >/dev/null; \
	else echo "no container engine and not root: container tests will be skipped"; fi
	@if [ -x /usr/bin/redis-server ] && [ -x /usr/sbin/nginx ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server nginx >/dev/null; \
	else echo "no redis-server or nginx and not root: the tests of replicas sharing a class will be skipped"; fi

test-container: $(VENV)/.installed-test container-engine
	$(BIN)/python -m pytest -m container tests/container

# Figures for reading, not assertions: writes bench/RESULTS.md and docs/performance.md's block.
bench: $(VENV)/.installed-test services
	$(BIN)/python -m bench --docs docs/performance.md

# An edit's rate against /healthz's under wrk (Debian's wrk, installed here when missing, as root).
bench-wrk: $(VENV)/.installed-test
	@command -v wrk >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
	$(BIN)/python -m bench.wrk

# A few seconds, only to prove the bench still runs (tests/test_bench.py does the same).
bench-quick: $(VENV)/.installed-test
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache test-artifacts
