"""A bad ``TASKS`` ``OPTIONS`` is one ``django_xjobs.E010`` line from ``manage.py check``, with
or without the documented ``@cron`` above ``@task`` (issue 23): the cron reads the backend's
options when an occurrence is enqueued, not when its module is imported, so no command dies of
an import error. A scratch project (one app, one ``jobs.py``) runs in a real process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.test import override_settings

from django_xjobs.declarations.cron import registered_crons
from django_xjobs.errors import ConfigInvalidError
from tests import tasks
from tests.support.process import ROOT

SETTINGS = """
import importlib.util

SECRET_KEY = "scratch"
USE_TZ = True
INSTALLED_APPS = ["django_xjobs", "shop"]
if importlib.util.find_spec("django.tasks") is None:
    INSTALLED_APPS.append("django_tasks")
DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "unused"}}
TASKS = {
    "default": {
        "BACKEND": "django_xjobs.backends.XJobsBackend",
        "OPTIONS": {"RETRY": "often"},
    }
}
"""

JOBS = """
from django_xjobs import cron
from django_xjobs.backends.tasks import task

{decorator}
@task
def nightly(occurrence=None):
    return None
"""


def project(root: Path, decorator: str) -> Path:
    (root / "shop").mkdir(parents=True)
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "jobs.py").write_text(JOBS.format(decorator=decorator))
    (root / "scratch_settings.py").write_text(textwrap.dedent(SETTINGS))
    return root


def manage(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "django", *argv, "--settings=scratch_settings"],
        env={"PYTHONPATH": f"{root}:{ROOT}", "PATH": "/usr/bin:/bin"},
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.process
@pytest.mark.parametrize("command", [["check"], ["diffsettings"]])
def test_a_bad_option_reads_the_same_with_and_without_a_cron(tmp_path, command):
    plain = project(tmp_path / "plain", "")
    scheduled = project(tmp_path / "scheduled", '@cron("0 3 * * *", tz="UTC")')
    without, with_cron = manage(plain, *command), manage(scheduled, *command)
    assert "Traceback" not in with_cron.stderr, with_cron.stderr
    assert (with_cron.returncode, with_cron.stderr) == (without.returncode, without.stderr)
    if command == ["check"]:
        [line] = [x for x in with_cron.stderr.splitlines() if "django_xjobs.E" in x]
        assert "django_xjobs.E010" in line and "RETRY" in line


def test_an_occurrence_of_a_cron_task_raises_the_bad_option_when_it_enqueues(db):
    """The error is not lost: it is what enqueueing the occurrence raises, as any enqueue."""
    [handle] = [c for c in registered_crons() if c.name == "tests.nightly_task"]
    [(job, inputs)] = handle.entries(handle.next_occurrence(datetime.now(UTC)))
    broken = {"default": {"BACKEND": "django_xjobs.backends.XJobsBackend", "OPTIONS": {"X": 1}}}
    with override_settings(TASKS=broken), pytest.raises(ConfigInvalidError, match="X"):
        job.build_request(inputs)
    assert tasks.nightly.module_path == job.name
