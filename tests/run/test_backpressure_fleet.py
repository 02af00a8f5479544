"""Backpressure when the database refuses connections (issue 12, item 6), with real processes.

Two workers connect as their own role; the outage is that role's connection limit dropped to 0
and its open connections terminated, so every reconnect is refused with SQLSTATE 53300 (too many
connections), the code a server at ``max_connections`` answers (a role limit, since this test
must not starve the other tests' connections of a shared server). Judged by the ledger, the job
rows and the workers' own log lines: the claim loops back off (failed claims bounded), the log
stays quiet, no job is dead-lettered, and every job completes once when connections return.
"""

from __future__ import annotations

import re
import signal
import time
import uuid
from collections import Counter
from urllib.parse import urlsplit

import pytest
from django.db import connection

from django_xjobs.models import Job
from django_xjobs.testing.postgres import database_url, url_for_database
from tests import jobs
from tests.models import Ledger
from tests.support.process import ledger, wait_for, worker_env

pytestmark = pytest.mark.process

OUTAGE = 5.0  # at least; and until both workers have seen a claim fail
POLL = 0.1
#: the breaker's waits from POLL, doubled per failure (capped at 10 s, a fifth of jitter off),
#: add up past a 5-20 s outage in under 10 tries; claiming at the poll interval makes 50-200
MAX_FAILED_CLAIMS = 15
#: lines a worker may log during the outage: rate-limited failures (one per kind of error and
#: event), plus one or two per run that was in flight (lease lost, settle failed, refused)
MAX_OUTAGE_LINES = 30


def _execute(sql: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql)


def _limited_role() -> tuple[str, str]:
    """A login role with the rights a worker needs on the test database, and its URL."""
    role, password = f"xjobs_limited_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    _execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    _execute(f"GRANT USAGE ON SCHEMA public TO {role}")
    _execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
    _execute(f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {role}")
    parts = urlsplit(url_for_database(database_url(), connection.settings_dict["NAME"]))
    host = parts.netloc.rsplit("@", 1)[-1]
    return role, parts._replace(netloc=f"{role}:{password}@{host}").geturl()


def _cut_off(role: str) -> None:
    _execute(f"ALTER ROLE {role} CONNECTION LIMIT 0")
    _execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")


def _failed_claims(err: list[str]) -> int:
    """Failed claims by one worker's own account: the counts its ``claim_resumed`` lines give,
    or, if more, its ``claim_failed`` lines plus the ones they say were held back."""
    resumed = sum(int(m.group(1)) for m in map(_RESUMED.search, err) if m)
    lines = [line for line in err if "xjobs.worker.claim_failed" in line]
    held_back = sum(int(m.group(1)) for m in map(_SUPPRESSED.search, lines) if m)
    return max(resumed, len(lines) + held_back)


_RESUMED = re.compile(r"xjobs\.worker\.claim_resumed .*failures=(\d+)")
_SUPPRESSED = re.compile(r"suppressed=(\d+)")


def test_workers_back_off_while_connections_are_refused_and_lose_no_job(workers):
    role, url = _limited_role()
    args = ("--queues", "default", "--concurrency", "2", "--visibility-timeout", "3s")
    args = (*args, "--poll-interval", f"{POLL * 1000:.0f}ms")
    fleet = [workers(*args, env=worker_env(url)) for _ in range(2)]
    prefix = f"outage-{uuid.uuid4()}"
    try:
        wait_for(
            lambda: all(w.saw("xjobs.worker.started") for w in fleet),
            timeout=60,
            what="both workers to start",
        )
        # two runs in flight when the outage starts: each honours its signal when its lease goes
        running = [f"{prefix}-running-{i}" for i in range(2)]
        ids = [jobs.ledger.enqueue(token=token, hold=3.0).id for token in running]
        wait_for(
            lambda: Ledger.objects.filter(token__in=running, phase="start").count() == 2,
            timeout=60,
            what="both long runs to start",
        )
        _cut_off(role)
        started, marks = time.monotonic(), [len(w.err) for w in fleet]
        queued = [f"{prefix}-queued-{i}" for i in range(6)]
        ids += [jobs.ledger.enqueue(token=token, hold=0.1).id for token in queued]
        # the outage lasts until every worker's claim loop has met it, and OUTAGE at least
        wait_for(
            lambda: (
                all(w.saw("xjobs.worker.claim_failed") for w in fleet)
                and time.monotonic() - started >= OUTAGE
            ),
            timeout=60,
            what="both workers to fail a claim",
        )
        _execute(f"ALTER ROLE {role} CONNECTION LIMIT -1")
        outage_lines = [w.err[mark:] for w, mark in zip(fleet, marks, strict=True)]

        wait_for(
            lambda: Job.objects.filter(id__in=ids, state="done").count() == len(ids),
            timeout=90,
            what=f"every job done: {Counter(Job.objects.filter(id__in=ids).values_list('state', flat=True))}",
        )
        for worker in fleet:
            worker.send(signal.SIGTERM)
        errs = []
        for worker in fleet:
            code, _, err = worker.finish(timeout=60)
            assert code == 0, err
            errs.append(err.splitlines())
    finally:
        for worker in fleet:
            worker.kill()
        _execute(f"ALTER ROLE {role} CONNECTION LIMIT -1")
        _execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")
        _execute(f"DROP OWNED BY {role}")
        _execute(f"DROP ROLE {role}")

    # no job dead-lettered (all done, above) and every one completed once: the long runs'
    # signal stopped them when their leases lapsed, before they could write their end
    for token in running + queued:
        assert len(ledger(token, "done")) == 1, token
    # the claim loops backed off: a bounded number of failed claims per worker
    failed = [_failed_claims(err) for err in errs]
    assert all(failed), f"a worker reported no failed claim: {failed}"
    assert max(failed) <= MAX_FAILED_CLAIMS, failed
    # and the log stayed quiet while the database refused them
    for lines in outage_lines:
        assert len(lines) <= MAX_OUTAGE_LINES, "".join(lines)


def _outcomes(out: str) -> Counter[str]:
    """The worker's own count of how its runs ended, from its last line (``stopped: ...``)."""
    summary = re.search(r"stopped: (.*)", out)
    assert summary is not None, out
    return Counter({k: int(n) for k, n in re.findall(r"(\w+) (\d+)", summary.group(1))})


def test_a_worker_short_of_connections_claims_only_what_can_get_one(workers):
    """Issue 25 item 2. One worker with 8 threads whose role may open only two connections more
    than it holds idle: the job threads, which connect per run, are refused (too many
    connections) and hand their runs back. The worker narrows its claims to what can get a
    connection instead of claiming full batches to hand them back: hand-backs stay within a
    tenth of its claims, and by the ledger every job completes once, none dead-lettered."""
    role, url = _limited_role()
    args = ("--queues", "default", "--concurrency", "8", "--poll-interval", "100ms")
    worker = workers(*args, env=worker_env(url))
    tokens = [f"starved-{uuid.uuid4()}-{i}" for i in range(80)]
    try:
        wait_for(lambda: worker.saw("xjobs.worker.started"), timeout=60, what="the worker")
        # One job run and settled first: the settler opens its connection at its first settle.
        # Counted before it, the settler took one of the two spare connections once the jobs
        # began, and the renewals' short connections could hold the other long enough to stall
        # the threads (seen once in CI: one job done in 90 s).
        warm = jobs.ledger.enqueue(token=f"warm-{uuid.uuid4()}").id
        wait_for(
            lambda: Job.objects.filter(id=warm, state="done").exists(), timeout=60, what="warm-up"
        )
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s", [role])
            idle = cursor.fetchone()[0]
        _execute(f"ALTER ROLE {role} CONNECTION LIMIT {idle + 2}")
        ids = [jobs.ledger.enqueue(token=t, hold=0.1).id for t in tokens]
        wait_for(
            lambda: Job.objects.filter(id__in=ids, state="done").count() == len(ids),
            timeout=90,
            what=f"every job done: {Counter(Job.objects.filter(id__in=ids).values_list('state', flat=True))}",
        )
        worker.send(signal.SIGTERM)
        code, out, err = worker.finish(timeout=60)
        assert code == 0, err
    finally:
        worker.kill()
        _execute(f"ALTER ROLE {role} CONNECTION LIMIT -1")
        _execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")
        _execute(f"DROP OWNED BY {role}")
        _execute(f"DROP ROLE {role}")

    assert [len(ledger(t, "done")) for t in tokens] == [1] * len(tokens)
    outcomes = _outcomes(out)
    claims = sum(outcomes.values())
    handed_back = outcomes["retried"] + outcomes["shed"]  # the job itself never fails
    assert handed_back >= 1, outcomes  # the limit did bite
    assert handed_back <= 0.1 * claims, outcomes
