# The two commands of the README, plus the checks CI runs.
# Needs only Python 3.11+: a virtualenv is made in $(VENV), and PostgreSQL is embedded unless
# DATABASE_URL points at a server.
#
# Each target installs only the extra it needs, behind its own marker file: `make demo` the
# small `demo` extra (seconds), `make test`/`lint` the `dev` extra, `make docs` the `docs` extra.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --quiet --disable-pip-version-check

.PHONY: demo test test-fast provision chaos lint docs bench clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit("django-xjobs needs Python 3.11+" if sys.version_info < (3, 11) else 0)'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) install --upgrade pip
	$(PIP) install -e '.[dev]'
	touch $@

# the demo's path skips the pip upgrade and the linters: the venv's own pip is good enough
$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[demo]'
	touch $@

$(VENV)/.docs-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[docs]'
	touch $@

demo: $(VENV)/.demo-installed  ## enqueue five jobs and run a worker until they settle
	@$(BIN)/python example_project/run_demo.py

test: $(VENV)/.installed provision  ## the whole suite, on PostgreSQL, in a random order (the seed is printed)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: $(VENV)/.installed  ## the unit lane: no database, no subprocess, no server started
	$(BIN)/python -m pytest -m unit $(PYTEST_ARGS)

# the machine's programs the suite runs (PgBouncer), from apt when missing; instant when present
provision:
	@bash scripts/provision

chaos: $(VENV)/.installed  ## real workers under faults (kill, stop, restart, outage...), one table; not in `make test`
	$(BIN)/python -m chaos $(CHAOS_ARGS)

lint: $(VENV)/.installed  ## ruff, formatting, type hints, and models in step with migrations
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	@# tests.settings starts no server; makemigrations's history check would warn that it is not there
	$(BIN)/python -W "ignore:Got an error checking a consistent migration history:RuntimeWarning" \
		-m django makemigrations --check --dry-run --settings=tests.settings

docs: $(VENV)/.docs-installed  ## the documentation site in build/docs; warnings fail
	$(BIN)/python -m sphinx -E -W --keep-going -q -b html docs build/docs

bench: $(VENV)/.installed  ## W1-W4 throughput and latency figures (not a test; empties x_jobs and the backfill ledger)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info build
