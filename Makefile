# The two commands of the README, plus the checks CI runs.
# Needs only Python 3.11+: a virtualenv is made in $(VENV), and PostgreSQL is embedded unless
# DATABASE_URL points at a server.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit("django-xjobs needs Python 3.11+" if sys.version_info < (3, 11) else 0)'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

demo: $(VENV)/.installed  ## enqueue three jobs and run a worker until they settle
	$(BIN)/python example_project/run_demo.py

test: $(VENV)/.installed  ## the whole suite, on PostgreSQL
	$(BIN)/python -m pytest

lint: $(VENV)/.installed  ## ruff, formatting, type hints, and models in step with migrations
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m django makemigrations --check --dry-run --settings=tests.settings

bench: $(VENV)/.installed  ## W1-W3 throughput and latency figures (not a test; empties x_jobs)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
