# Asicmon: `make run` starts the whole stack, `make test` runs every test.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export PYTHONUNBUFFERED := 1

.PHONY: eventscan fuzz-scanner run database agent test test-fast soak test-machines lint bench bench-fleet bench-atrace bench-atrace-huge bench-trace-views proto bench-chakra bench-tsdb browser-deps prometheus-deps tsdb-deps slurm-deps alert-deps spec-docs clean

# One command, no shell syntax: make runs the runner as its own child, and the runner stops the
# stack when make gets SIGINT/SIGHUP/SIGTERM (make itself passes on only SIGTERM; dashboard/stack.py).
run: $(VENV)/.runtime tsdb-deps
	$(BIN)/python -m dashboard.stack run

# The PostgreSQL database DATABASE_URL names, created if missing (waits DATABASE_WAIT seconds
# for the server, and fails with its reason if it does not answer): a new CI machine has none.
database: $(VENV)/.runtime
	$(BIN)/python -m dashboard.stack database

# On a machine with real accelerators: register this host and poll its devices. Needs the
# central stack's DATABASE_URL and REDIS_URL (see "Monitor real machines" in the README).
agent: $(VENV)/.runtime
	$(BIN)/python -m fleet.agent

# Every tier, as CI runs it: the unit tests in parallel, then the tests that start processes
# or drive Chromium (tests/support/tiers.py says which is which); property tests try every
# example they ask for (Hypothesis profile `ci`).
test: export HYPOTHESIS_PROFILE ?= ci
test: $(VENV)/.dev browser-deps prometheus-deps tsdb-deps slurm-deps alert-deps
	$(BIN)/python -m dashboard.stack test --tiers=unit+slow,stack --durations=25 $(PYTEST_ARGS)

# The unit tier only (no child processes, no browser), in parallel: the loop while working.
test-fast: $(VENV)/.dev prometheus-deps tsdb-deps
	$(BIN)/python -m dashboard.stack test --tiers=unit $(PYTEST_ARGS)

# The long soak: websockets held through 10 minutes of polling at the default interval.
soak: $(VENV)/.dev tsdb-deps
	ASICMON_SOAK=long $(BIN)/python -m dashboard.stack test tests/scenarios/test_soak.py $(PYTEST_ARGS)

# The roles on machines of their own (own var/, no shared folder) against one object store.
test-machines: $(VENV)/.dev tsdb-deps
	$(BIN)/python -m dashboard.stack test tests/scenarios/test_machines.py tests/traces/store/test_object_store.py -n 0 $(PYTEST_ARGS)

lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/python -m fleet.asimov.interface.document --check

# docs/spec/ (the published interface and its JSON Schemas), written from the code.
spec-docs: $(VENV)/.runtime
	$(BIN)/python -m fleet.asimov.interface.document

# Figures for the hot paths (scripts that print, not timed tests).
bench: $(VENV)/.dev
	$(BIN)/python benchmarks/bench_probe.py
	$(BIN)/python benchmarks/bench_poll.py
	$(BIN)/python benchmarks/bench_agent.py
	$(BIN)/python benchmarks/bench_health.py

# A 10,000-device fleet: probe cost per device, one cycle's ingestion three ways, the push size
# (PostgreSQL at DATABASE_URL for the ingestion figures; minutes).
bench-fleet: $(VENV)/.dev
	$(BIN)/python benchmarks/bench_fleet10k.py
	$(BIN)/python benchmarks/bench_fleet_capacity.py breakdown  # where a poll cycle's time goes (1k, 10k)

# The time-series store on a VictoriaMetrics of its own: an hour of a 10,000-device fleet
# (bytes per sample, ingest rate, CPU per device), reads over 2 h, 30 days and a fleet-wide
# p95 over 24 h, and the 60 s outage's count (minutes).
bench-tsdb: $(VENV)/.dev tsdb-deps
	$(BIN)/python benchmarks/bench_tsdb.py
	$(BIN)/python benchmarks/bench_history.py  # the readers' queries: device page, API, fleet p95
	$(BIN)/python benchmarks/bench_spool_refusals.py  # 10 minutes of 401s, then fixed: samples lost

# Atrace against HTA on 10k/100k/1M-event Kineto traces (builds benchmarks/.venv-hta; minutes).
bench-atrace: $(VENV)/.dev
	$(BIN)/python benchmarks/bench_atrace.py
	$(BIN)/python benchmarks/bench_atrace_real.py
	$(BIN)/python benchmarks/bench_advise.py

# A 5 GB Kineto trace (18M events) analysed end to end in bounded memory: generated once
# under benchmarks/out/ (5 GB of disk), then load, breakdown, critical path and the stored
# page views, with the peak memory against the file's size (tens of minutes on 2 cores).
bench-atrace-huge: $(VENV)/.dev
	$(BIN)/python benchmarks/bench_atrace_huge.py

# The trace page at 1M events: analysis cost, timeline/flame/comparison requests, and the
# page in Chromium (first paint, charts drawn, capture click → first progress).
bench-trace-views: $(VENV)/.dev browser-deps
	$(BIN)/python benchmarks/bench_trace_views.py
	$(BIN)/python benchmarks/bench_trace_page.py

# Chakra .et / JSON export and import at 10k and 100k events (prints figures).
bench-chakra: $(VENV)/.dev
	$(BIN)/python benchmarks/bench_chakra.py

# The event scanner against the msgspec path on fuzzed real batches, for FUZZ_SECONDS (ten
# minutes by default; CI runs 20 s of it in the slow tier). A divergence is written to a
# temporary folder and named; copy it into tests/data/scanner-corpus/ to keep it as a test.
FUZZ_SECONDS ?= 600
fuzz-scanner: $(VENV)/.dev
	$(BIN)/python -m tests.support.scanfuzz --seconds $(FUZZ_SECONDS)

# Regenerate the Chakra protobuf module from its vendored schema (commit the result).
CHAKRA_SCHEMA := traces/atrace/io/chakra_schema
proto: $(VENV)/.dev
	$(BIN)/python -m grpc_tools.protoc -I $(CHAKRA_SCHEMA) --python_out=$(CHAKRA_SCHEMA) \
	  --pyi_out=$(CHAKRA_SCHEMA) $(CHAKRA_SCHEMA)/et_def.proto

# Debian's Chromium and its driver, for the real-browser tests.
browser-deps:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  ($(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q chromium chromium-driver)

# Debian's VictoriaMetrics: the time-series store `make run` and `make test` start when none
# answers at TSDB_URL.
tsdb-deps:
	@command -v victoria-metrics >/dev/null || \
	  ($(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q victoria-metrics)

# Debian's Prometheus (and promtool), for the scrape and alert-rule tests.
prometheus-deps:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || \
	  ($(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q prometheus)

# Debian's Slurm and munge, for the tests that drain and resume nodes on a real one-node
# cluster (tests/support/slurm.py starts munged, slurmctld and slurmd).
slurm-deps:
	@command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null || \
	  ($(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q slurm-wlm munge)

# Debian's Alertmanager, for the tests that deliver the fleet's alerts through it to a webhook.
alert-deps:
	@command -v prometheus-alertmanager >/dev/null || \
	  ($(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q prometheus-alertmanager)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.runtime: requirements.txt | $(BIN)/python eventscan
	$(BIN)/pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt | $(BIN)/python eventscan
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@ $(VENV)/.runtime

# Atrace's event scanner in C (traces/atrace/io/chrome/native.py), compiled with this
# machine's C compiler for this venv's Python. Looked at on every make (a few ms): built
# when missing, for another Python, or from another source than the one checked out (the
# build carries its source's hash); without a compiler the reader decodes with msgspec
# alone (slower, same traces), and says so.
eventscan: | $(BIN)/python
	@$(BIN)/python traces/atrace/io/chrome/native.py --ensure || \
	  echo "warning: Atrace's event scanner was not built (no C compiler?): traces load at about half speed"

clean:
	rm -rf var/staticfiles var/test-db.sqlite3* var/pycache .pytest_cache .ruff_cache
