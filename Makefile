# lbeval: every target depends on `setup`, so a fresh clone needs no manual step.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.lbeval-stamp
LBEVAL := $(BIN)/lbeval

# Defaults for `make eval` / `make compare` (documented in README.md).
VARIANT ?= patched
BASE ?= main
DATASETS ?= qasper,gov_report
N ?= 16
SEED ?= 20260909
BASE_URL ?= http://127.0.0.1:8000/v1
RUNS ?= runs

.PHONY: setup test check lint typecheck bench eval compare gate demo server-venv server-model clean help

help:
	@echo "make setup | test | check | bench | eval VARIANT=x | compare BASE=a VARIANT=b | gate | demo"

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

test: setup
	$(BIN)/python -m pytest -q tests

check: lint typecheck

lint: setup
	$(BIN)/ruff check eval scorers tests bench
	$(BIN)/ruff format --check eval scorers tests bench

typecheck: setup
	$(BIN)/mypy

bench: setup
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
