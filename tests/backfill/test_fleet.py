"""A backfill pass survives a SIGKILLed worker (issue 15, Done-when), with real processes.

20,000 rows in pages of 200. Worker A runs the pass and is SIGKILLed in the middle of a page;
worker B claims the pass when A's lease lapses and goes on at the page after the last one A
recorded. The kill lands at a chosen point: the test holds a lock that A's next write of the page
waits on, so A dies either before its handler's commit (the page's rows are locked) or after it,
before the page's record (the ledger row is locked). The data judges, not the log: every row
fixed, each row handled once (``Order.handled``), A's page records kept as they were, the ledger
row completed with the totals of the recorded pages. Then the completed backfill refuses a new
pass until it is forced.
"""

from __future__ import annotations

import json
import signal
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection, transaction

from django_xjobs.models import Backfill, Job, JobStep
from tests import backfills
from tests.models import Order
from tests.support.process import run_manage, wait_for, worker_env

pytestmark = pytest.mark.process

ROWS = 20_000
BATCH = 200  # tests.fill_big's batch
PAGES = ROWS // BATCH
#: the page A is stopped in: far enough in to have records, far from the end
STOP_AT = 10


def _sessions(application_name: str) -> tuple[int, int]:
    """How many sessions ``application_name`` has, and how many of them wait for a lock this
    test's session holds: not any lock wait, since a worker's own sessions may wait on each
    other for a moment (a settle and a heartbeat on one row), which is not the page's lock."""
    with connection.cursor() as cursor:
        # pg_stat_activity is read once per transaction unless told otherwise, and the test
        # polls it inside the transaction that holds the lock
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*),"
            " count(*) FILTER (WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid)))"
            " FROM pg_stat_activity WHERE application_name = %s",
            [application_name],
        )
        sessions, waiting = cursor.fetchone()
    return sessions, waiting


def _pages(run_id: uuid.UUID) -> dict[int, JobStep]:
    """The pass's recorded pages, by index."""
    steps = JobStep.objects.filter(run_id=run_id, name__startswith="batch:", status="completed")
    return {int(s.name.removeprefix("batch:")): s for s in steps}


@contextmanager
def _hold(window: str, run_id: uuid.UUID, pks: list[int]) -> Iterator[None]:
    """A lock that stops A's pass in a page: ``before-commit`` holds page ``STOP_AT``'s rows,
    so the handler's UPDATE waits; ``after-commit`` holds the ledger row once A has recorded
    ``STOP_AT`` pages, so the next page's progress write waits, after its handler committed
    and before its step record (backfill._pages writes them in that order)."""
    if window == "before-commit":
        with transaction.atomic():
            page = pks[STOP_AT * BATCH : (STOP_AT + 1) * BATCH]
            list(Order.objects.select_for_update().filter(pk__in=page))
            yield
        return
    wait_for(
        lambda: len(_pages(run_id)) >= STOP_AT,
        timeout=60,
        what=f"worker A to record {STOP_AT} pages",
    )
    with transaction.atomic():
        Backfill.objects.select_for_update().get(run_id=run_id)
        yield


@pytest.mark.parametrize("window", ["before-commit", "after-commit"])
def test_a_killed_pass_resumes_at_the_next_page_and_every_row_is_handled_once(workers, window):
    Order.objects.bulk_create(Order() for _ in range(ROWS))
    pks = list(Order.objects.order_by("pk").values_list("pk", flat=True))
    job_id = backfills.fill_big.enqueue().id
    run_id = Job.objects.get(id=job_id).run_id
    args = ("--queues", "default", "--concurrency", "2", "--poll-interval", "100ms")
    args = (*args, "--visibility-timeout", "2s")
    name = f"bf-victim-{uuid.uuid4().hex[:8]}"  # its backends, in pg_stat_activity
    victim = workers(*args, env={**worker_env(), "PGAPPNAME": name})
    with _hold(window, run_id, pks):
        wait_for(lambda: _sessions(name)[1], timeout=60, what="worker A to wait on the lock")
        victim.send(signal.SIGKILL)
        victim.proc.wait(timeout=30)
    # A's waiting statement ends once the lock is gone (an UPDATE in autocommit commits, one in
    # the handler's transaction is rolled back with the dropped connection): then the picture
    # of what A did is final
    wait_for(lambda: _sessions(name)[0] == 0, timeout=30, what="worker A's sessions to end")
    recorded = {i: (s.id, s.completed_at, s.output) for i, s in _pages(run_id).items()}
    fixed_by_a = set(Order.objects.filter(currency__isnull=False).values_list("pk", flat=True))

    last = len(recorded)  # A recorded the pages 0..last-1, and was in page `last`
    assert sorted(recorded) == list(range(last))
    assert last == STOP_AT if window == "before-commit" else STOP_AT <= last < PAGES - 1
    assert Job.objects.get(id=job_id).state == "running"
    assert recorded[last - 1][2]["cursor"] == pks[last * BATCH - 1]
    in_flight = fixed_by_a - set(pks[: last * BATCH])  # rows A fixed beyond its records
    assert fixed_by_a >= set(pks[: last * BATCH])
    page_after = pks[last * BATCH : (last + 1) * BATCH]
    assert in_flight == (set() if window == "before-commit" else set(page_after))

    survivor = workers(*args)
    wait_for(
        lambda: Job.objects.get(id=job_id).state == "done",
        timeout=60,
        what="worker B to finish the pass",
    )

    assert set(Order.objects.values_list("currency", flat=True)) == {"USD"}
    # each row handled once: no recorded page ran again, and neither did the rows of the page
    # in flight (rolled back: B handled them first; committed: they no longer match the
    # queryset, so B's page found the next rows)
    handled = Counter(Order.objects.values_list("handled", flat=True))
    assert handled == {1: ROWS}, f"rows by times handled: {dict(handled)}"
    pages = _pages(run_id)
    for i, (step_id, completed_at, output) in recorded.items():
        assert (pages[i].id, pages[i].completed_at, pages[i].output) == (
            step_id,
            completed_at,
            output,
        ), f"batch:{i}, recorded by A, was written again"
    assert {s.attempts for s in pages.values()} == {1}  # no page record written twice
    # B went on at page `last`, from A's cursor: with A's in-flight rows if they were rolled
    # back, with the next ones if they were committed
    skipped = len(in_flight) // BATCH
    resumed = pages[last].output
    assert resumed["cursor"] == pks[(last + 1 + skipped) * BATCH - 1]
    assert resumed["rows"] == (last + 1) * BATCH
    job = Job.objects.get(id=job_id)
    assert job.attempt == 2
    # the totals are the recorded pages': a page A fixed and never recorded is in none of them
    # (BF-03 checkpoints the row count in the page's step record)
    totals = {"rows": ROWS - len(in_flight), "pages": PAGES - skipped}
    assert job.result == totals
    [row] = Backfill.objects.filter(name="tests.fill_big")
    assert (row.run_id, row.job_id, row.status) == (run_id, job_id, "completed")
    assert (row.rows_processed, row.pages) == (totals["rows"], totals["pages"])
    assert row.last_cursor is None and row.error is None

    # completed here: `xjobs_backfill NAME` is refused until --force, and a pass enqueued by
    # hand ends at once, X_BACKFILL_APPLIED; the forced one runs with a ledger row of its own
    again = run_manage("xjobs_backfill", "tests.fill_big", "--settings=tests.settings")
    assert again.returncode == 1, again.stderr
    assert again.stderr.startswith("CommandError: X_BACKFILL_APPLIED"), again.stderr
    refused = backfills.fill_big.enqueue().id
    wait_for(lambda: Job.objects.get(id=refused).state == "dead", what="the new pass to end")
    assert Job.objects.get(id=refused).last_error.startswith("X_BACKFILL_APPLIED")
    forcing = ("xjobs_backfill", "tests.fill_big", "--force", "--json")
    started = run_manage(*forcing, "--settings=tests.settings")
    assert started.returncode == 0, started.stderr
    forced = uuid.UUID(json.loads(started.stdout)["job"])
    wait_for(lambda: Job.objects.get(id=forced).state == "done", what="the forced pass to end")
    forced_run = Job.objects.get(id=forced).run_id
    rows = {r.run_id: r for r in Backfill.objects.filter(name="tests.fill_big")}
    assert set(rows) == {run_id, forced_run}
    assert (rows[forced_run].status, rows[forced_run].rows_processed) == ("completed", 0)
    assert rows[run_id].completed_at == row.completed_at  # the first pass's row is kept

    survivor.send(signal.SIGTERM)
    code, _, err = survivor.finish(timeout=60)
    assert code == 0, err
