"""The decisions behind ``xjobs_worker --processes``: which limit a child passed, what a
child's exit code means, the command line a child runs, and the flags refused before anything
starts (issue 12 item 5). The processes themselves: tests/worker/test_supervisor_fleet.py."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
from django.core.management import CommandError, call_command

from django_xjobs.errors import InvariantError
from django_xjobs.worker.recycle import EXIT_CODES, ChildLimits, parse_size
from django_xjobs.worker.supervisor import child_argv, exit_reason, rerun_argv
from django_xjobs.worker.worker import WorkerStats


def stats(abandoned: int = 0, **outcomes: int) -> WorkerStats:
    return WorkerStats("w", ("default",), "running", 0, Counter(outcomes), abandoned=abandoned)


def test_max_jobs_counts_runs_not_shed_jobs():
    limits = ChildLimits(max_jobs=3)
    assert limits.breached(stats(completed=2, shed=5), rss=0) is None
    assert limits.breached(stats(completed=2, retried=1), rss=0) == ("max_jobs", 3, 3)


def test_max_abandoned_is_passed_only_above_the_bound():
    limits = ChildLimits(max_abandoned=1)
    assert limits.breached(stats(abandoned=1), rss=0) is None
    assert limits.breached(stats(abandoned=2), rss=0) == ("max_abandoned", 1, 2)
    assert ChildLimits(max_abandoned=0).breached(stats(abandoned=1), rss=0) is not None


def test_max_memory_compares_resident_bytes():
    limits = ChildLimits(max_memory=100)
    assert limits.breached(stats(), rss=100) is None
    assert limits.breached(stats(), rss=101) == ("max_memory", 100, 101)
    assert not ChildLimits().any and limits.any


@pytest.mark.parametrize(
    ("raw", "size"),
    [("300MB", 300 * 1024**2), ("1.5G", int(1.5 * 1024**3)), ("512k", 512 * 1024), ("42", 42)],
)
def test_memory_sizes(raw, size):
    assert parse_size(raw, flag="--max-memory-per-child") == size


@pytest.mark.parametrize("raw", ["", "lots", "0MB", "-1", "3 parsecs"])
def test_a_bad_memory_size_is_one_line_with_a_hint(raw):
    with pytest.raises(InvariantError) as caught:
        parse_size(raw, flag="--max-memory-per-child")
    assert caught.value.code == "X_INVARIANT" and caught.value.hint


def test_exit_codes_name_their_reason():
    assert exit_reason(0) == "drained"
    assert exit_reason(-9) == "killed by SIGKILL"
    assert exit_reason(EXIT_CODES["max_jobs"]) == "max_jobs"
    assert exit_reason(EXIT_CODES["orphaned"]) == "orphaned"
    assert exit_reason(1) == "exited with code 1"


def test_a_child_runs_the_same_line_without_the_supervisor_flags():
    argv = [
        "manage.py",
        "xjobs_worker",
        "--processes",
        "2",
        "--worker-id=w",
        "--queues",
        "default",
        "--supervisor-pid",
        "7",
        "--processes=3",
        "--max-jobs-per-child",
        "5",
    ]
    assert child_argv(argv) == [
        "manage.py",
        "xjobs_worker",
        "--queues",
        "default",
        "--max-jobs-per-child",
        "5",
    ]


def test_a_command_started_with_python_m_restarts_its_children_with_m():
    """``python -m django xjobs_worker --processes 2``: argv[0] is django/__main__.py, which run
    as a script puts django/ first on sys.path and shadows the standard library's ``http``."""
    spec = SimpleNamespace(name="django.__main__")
    argv = ["/venv/lib/django/__main__.py", "xjobs_worker", "--processes", "2"]
    assert rerun_argv(argv, spec) == ["-m", "django", "xjobs_worker", "--processes", "2"]
    script = SimpleNamespace(name=None)
    assert rerun_argv(["manage.py", "xjobs_worker"], script) == ["manage.py", "xjobs_worker"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--processes", "0"], "X_INVARIANT: --processes must be at least 1"),
        (["--processes", "2", "--health-port", "9100"], "X_INVARIANT: --health-port"),
        (["--max-jobs-per-child", "0"], "X_INVARIANT: --max-jobs-per-child must be at least 1"),
        (["--max-abandoned-per-child", "-1"], "--max-abandoned-per-child must be at least 0"),
        (["--max-memory-per-child", "lots"], "X_INVARIANT: --max-memory-per-child 'lots'"),
        (["--processes", "2"], "X_INVARIANT: --processes re-runs this command line"),
    ],
)
def test_bad_supervisor_flags_are_refused_before_anything_starts(args, message):
    with pytest.raises(CommandError) as caught:
        call_command("xjobs_worker", *args)
    assert message in str(caught.value)
