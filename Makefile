# Asicmon: `make run` starts the whole stack, `make test` runs every test.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export PYTHONUNBUFFERED := 1

.PHONY: run test lint bench bench-atrace browser-deps clean

run: $(VENV)/.runtime
	$(BIN)/python -m dashboard.stack run

test: $(VENV)/.dev browser-deps
	$(BIN)/python -m dashboard.stack test $(PYTEST_ARGS)

lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/python manage.py makemigrations --check --dry-run

# Figures for the hot paths (scripts that print, not timed tests).
bench: $(VENV)/.dev
	$(BIN)/python benchmarks/bench_probe.py
	$(BIN)/python benchmarks/bench_poll.py

# Atrace against HTA on 10k/100k/1M-event Kineto traces (builds benchmarks/.venv-hta; minutes).
bench-atrace: $(VENV)/.dev
	$(BIN)/python benchmarks/bench_atrace.py

# Debian's Chromium and its driver, for the real-browser tests.
browser-deps:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  ($(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q chromium chromium-driver)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.runtime: requirements.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@ $(VENV)/.runtime

clean:
	rm -rf var/staticfiles var/test-db.sqlite3* .pytest_cache .ruff_cache
