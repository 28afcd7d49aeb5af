# The two set-up commands of the README: `make run` and `make test`.
# Both create .venv, install the package with pinned dependencies and check Java.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export PYSPARK_PYTHON := $(abspath $(BIN)/python)
export PYSPARK_DRIVER_PYTHON := $(abspath $(BIN)/python)

.PHONY: run test lint bench setup clean

run: setup
	$(BIN)/streamshield serve

bench: setup
	$(BIN)/python -m bench.run

test: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check src tests bench

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/ensure-java.sh
	bash scripts/ensure-java.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

clean:
	rm -rf $(VENV) build .pytest_cache .ruff_cache .hypothesis
