# The two set-up commands of the README: `make run` and `make test`.
# Both create .venv, install the package with pinned dependencies and check Java;
# `make run` installs what the server needs, the rest (`make test`, lint, benches) adds
# the dev extra (pytest, Playwright, schemathesis, mypy, matplotlib: over 1 GB). One stamp
# per kind, so `make test` after `make run` adds the dev extra to the same .venv.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
PORT ?=

export PYSPARK_PYTHON := $(abspath $(BIN)/python)
export PYSPARK_DRIVER_PYTHON := $(abspath $(BIN)/python)

.PHONY: run test lint bench figures setup clean constraints

# `make run PORT=8444`: another port (as STREAMSHIELD_PORT=8444 does). `warm-up` writes
# the JVM class archive once per install (30-90 s) and returns at once after.
run: $(RUN_STAMP)
	$(BIN)/streamshield warm-up
	$(BIN)/streamshield serve $(if $(PORT),--port $(PORT))

bench: setup
	$(BIN)/python -m bench.table13
	$(BIN)/python -m bench.served_load
	$(BIN)/python -m bench.kafka_source

# Every experiment figure of the papers, re-measured (long: see docs/experiments.md);
# `python -m bench.figures --render` only redraws them from bench/results/*.json.
figures: setup
	$(BIN)/python -m bench.figures

# Two worker processes, a test file per worker at a time (module fixtures set up once):
# most of the suite waits on Spark triggers, servers and a browser, so two processes
# on two cores finish well before one (a third one made each heavy test 1.5-3x slower
# for about the same total). `pytest` alone still runs everything serially.
test: setup
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools
	$(BIN)/mypy
	$(BIN)/python -m tools.history_lint
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=25

# mypy: configured in pyproject.toml ([tool.mypy]); incremental in .mypy_cache.
# tools.history_lint: code, docs and test names say what and why, never when.
lint: setup
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools
	$(BIN)/mypy
	$(BIN)/python -m tools.history_lint

setup: $(DEV_STAMP)

$(RUN_STAMP): pyproject.toml constraints.txt scripts/ensure-java.sh
	bash scripts/ensure-java.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e .
	touch $(RUN_STAMP)

$(DEV_STAMP): $(RUN_STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(DEV_STAMP)

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache .mypy_cache .hypothesis

# Re-pin constraints.txt to what the ranges of pyproject.toml resolve to today.
constraints:
	rm -rf .venv-pin && $(PYTHON) -m venv .venv-pin
	.venv-pin/bin/python -m pip install --quiet '.[dev]'
	{ echo "# Exact versions that make and CI install (pip install -c constraints.txt)."; \
	  echo "# pyproject.toml declares compatible ranges; regenerate this with 'make constraints'."; \
	  .venv-pin/bin/python -m pip freeze --all --exclude-editable | grep -viE '^(streamshield|pip)=='; } > constraints.txt
	rm -rf .venv-pin
