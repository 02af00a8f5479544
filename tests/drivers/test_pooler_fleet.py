"""A fleet behind a real transaction-mode PgBouncer (issue 17 §2): workers, relay and scheduler
as real ``manage.py`` processes whose every database call goes through the pooler
(tests/settings_pooled.py), each job run exactly once by the ledger.

One worker LISTENs on a direct connection (``XJOBS["LISTEN_DATABASE"]``) and polls only every
30 s, so a job it runs at once was announced by NOTIFY; the other worker and the relay have no
direct connection and fall back to polling, saying so once in their log.
"""

from __future__ import annotations

import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings

from django_xjobs.models import Job, OutboxEntry
from django_xjobs.testing.postgres import database_url, url_for_database
from tests import jobs
from tests.models import Ledger
from tests.support.pgbouncer import pgbouncer_url  # noqa: F401 - the module's pooler
from tests.support.process import MANAGE, ManageProcess, wait_for, worker_env

pytestmark = pytest.mark.process

POLLING = "xjobs.listener.polling"


class Pooled(ManageProcess):
    """``manage.py <command>`` with tests.settings_pooled: DATABASES through the pooler."""

    def __init__(self, command: str, *args: str, env: dict[str, str]) -> None:
        self.start(
            [sys.executable, str(MANAGE), command, "--settings=tests.settings_pooled", *args], env
        )


@pytest.fixture
def fleet(pgbouncer_url, transactional_db) -> Iterator[Callable[..., Pooled]]:  # noqa: F811
    started: list[Pooled] = []

    def start(command: str, *args: str, listen: bool = False) -> Pooled:
        env = worker_env(pgbouncer_url)
        if listen:
            env["XJOBS_LISTEN_URL"] = url_for_database(
                database_url(), connection.settings_dict["NAME"]
            )
        process = Pooled(command, *args, env=env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def _done(tokens: list[str]) -> bool:
    return Ledger.objects.filter(token__in=tokens, phase="done").count() >= len(tokens)


def test_workers_relay_and_scheduler_run_each_job_once_through_the_pooler(fleet) -> None:
    """SPEC SCHED-15: the scheduler leads through a transaction pooler, which a session's
    advisory lock would not survive: only the lease row is used."""
    listening = fleet("xjobs_worker", "--concurrency", "4", "--poll-interval", "30s", listen=True)
    wait_for(lambda: listening.saw("xjobs.worker.started"), timeout=20, what="the listening worker")
    first = [f"listen-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for token in first:  # direct enqueues: NOTIFY on commit, heard on the direct connection
        jobs.ledger.enqueue(token=token)
        wait_for(lambda token=token: _done([token]), timeout=10, what="a job woken by NOTIFY")

    polling = fleet("xjobs_worker", "--concurrency", "4", "--poll-interval", "200ms")
    relay = fleet("xjobs_relay", "--interval", "200ms")
    scheduler = fleet("xjobs_scheduler", "--tick-interval", "200ms")
    for process, started in (
        (polling, "xjobs.worker.started"),
        (relay, "xjobs.relay.started"),
        (scheduler, "xjobs.scheduler.leader"),
    ):
        wait_for(lambda p=process, s=started: p.saw(s), timeout=20, what=started)
    staged = [f"staged-{uuid.uuid4().hex[:8]}" for _ in range(40)]
    required = override_settings(XJOBS={**settings.XJOBS, "OUTBOX": "required"})
    with required, transaction.atomic():
        for token in staged:
            jobs.ledger.enqueue(token=token)
        connection.run_on_commit.clear()  # as if this process died at COMMIT: relay only
    assert OutboxEntry.objects.count() == len(staged)
    wait_for(lambda: _done(staged), timeout=20, what="the staged jobs, relayed and run")
    wait_for(
        lambda: Job.objects.filter(name="tests.jobs.ok", state="done").exists(),
        timeout=10,
        what="a cron occurrence dispatched and run",
    )

    done = Counter(Ledger.objects.filter(phase="done").values_list("token", flat=True))
    assert done == Counter(first + staged)  # each once: none lost, none run twice
    assert not Job.objects.exclude(state__in=["done", "ready", "running"]).exists()
    assert OutboxEntry.objects.filter(published_at__isnull=True).count() == 0
    pids = set(Ledger.objects.values_list("pid", flat=True))
    assert listening.proc.pid in pids
    # the fallbacks said so once each; the listening worker never fell back, nor failed to LISTEN
    assert sum(POLLING in line for line in polling.err) == 1
    assert sum(POLLING in line for line in relay.err) == 1
    assert not listening.saw(POLLING) and not listening.saw("xjobs.listener.failed")
    for process in (listening, polling, relay, scheduler):
        assert not process.saw("Traceback"), "".join(process.err)
