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


class _Ended:
    """A child process as the supervisor polls it: running until the test ends it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.code: int | None = None

    def poll(self) -> int | None:
        return self.code


def test_a_child_that_keeps_dying_at_start_is_restarted_after_a_growing_pause(monkeypatch, caplog):
    """Deaths within 5 s of a child's start, in a row, pause its restart 0.5 s, then 1 s, 2 s...;
    a child that lived longer (or a fast max_jobs recycle) resets the streak and is replaced at
    once. The clock is the test's: on a real, loaded machine Django's start alone can pass 5 s
    (tests/worker/test_supervisor_fleet.py pins the same ladder in the log of real processes)."""
    from django_xjobs.worker import supervisor as module

    clock = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    sup = module.Supervisor(["worker"], 1)
    children: list[module.Child] = []

    def spawn(slot: int) -> module.Child:
        child = module.Child(slot, _Ended(len(children)), None, started=clock[0])  # type: ignore[arg-type]
        sup.children[slot] = child
        children.append(child)
        return child

    monkeypatch.setattr(sup, "_spawn", spawn)
    spawn(0)

    def end_after(seconds: float, code: int = EXIT_CODES["max_memory"]) -> float | None:
        """The running child ends ``seconds`` after its start: the pause its replacement logs."""
        clock[0] = children[-1].started + seconds
        children[-1].proc.code = code  # type: ignore[attr-defined]
        caplog.clear()
        sup._replace_ended()
        [record] = [r for r in caplog.records if r.event == "xjobs.supervisor.replaced"]
        return record.fields["restart_in"]

    def restarted_after(pause: float) -> None:
        """No new child before ``pause`` has passed, one once it has."""
        spawned = len(children)
        clock[0] += pause - 0.01
        sup._replace_ended()
        assert len(children) == spawned
        clock[0] += 0.01
        sup._replace_ended()
        assert len(children) == spawned + 1

    with caplog.at_level("INFO", logger="django_xjobs"):
        for pause in (0.5, 1.0, 2.0, 5.0):  # quick deaths in a row: a growing pause
            assert end_after(1.0) == pause
            restarted_after(pause)
        assert end_after(6.0) is None  # a child that outlived the bound: replaced at once
        assert len(children) == 6
        assert end_after(1.0) == 0.5  # and the streak starts over
        restarted_after(0.5)
        assert end_after(1.0, EXIT_CODES["max_jobs"]) is None  # a fast recycle is not a death
        assert end_after(1.0) == 0.5
