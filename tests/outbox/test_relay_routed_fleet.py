"""The outbox across databases under SIGKILL (issue 48 item 2, SPEC SHARD-10): an enqueue
staged in the caller's database is published into the database its queue routes to, where the
job's insert commits before the outbox row is marked. A producer killed in its after-commit
publish and a relay killed in its own, each between the insert and the mark, leave rows another
relay publishes again: the id minted at staging finds the job already written, so each committed
enqueue runs once — counted by the ledger a real worker's runs write, not by the rows alone.

Kill points are pinned with a trigger that ``pg_sleep``s inside the mark (tests/outbox/
test_relay_fleet.py's lab); every wait is a poll with a deadline.
"""

from __future__ import annotations

import signal
import uuid

import pytest

from django_xjobs.models import Job, OutboxEntry
from tests.models import Ledger
from tests.outbox import test_relay_fleet
from tests.outbox.test_crash_fleet import committed, kill_and_end_backend, staged
from tests.outbox.test_relay_fleet import Lab
from tests.support.process import ManageProcess, WorkerProcess, wait_for

pytestmark = [pytest.mark.process, pytest.mark.django_db(databases=["default", "shard"])]
lab = test_relay_fleet.lab  # the fixture: relays killed, sleeping backends ended, triggers dropped

SETTINGS = "--settings=tests.settings_routed"

#: ``manage.py shell -c``: each batch one transaction on the default database, its enqueues on
#: the ``reports`` queue (routed to ``shard``) staged there with a ledger row each
PRODUCER = """
import os
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings

override_settings(XJOBS={**settings.XJOBS, "OUTBOX": "auto", "OUTBOX_CLAIM_LEASE": 2}).enable()
from tests import jobs
from tests.models import Ledger

for tokens, hold_open in BATCHES:
    with transaction.atomic():
        for token in tokens:
            jobs.ledger.using(queue="reports").enqueue(token=token)
            Ledger.objects.create(token=token, phase="committed", attempt=0, pid=os.getpid())
        if hold_open:
            print("open", flush=True)
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_sleep(60)")
    print("committed", len(tokens), flush=True)
"""


def producer(lab: Lab, batches: list[tuple[list[str], bool]]) -> ManageProcess:
    code = PRODUCER.replace("BATCHES", repr(batches))
    process = ManageProcess("shell", "-c", code, SETTINGS)
    lab.started.append(process)
    return process


def relay(lab: Lab, relay_id: str) -> ManageProcess:
    process = ManageProcess(
        "xjobs_relay",
        "--claim-lease",
        "2s",
        "--interval",
        "100ms",
        "--relay-id",
        relay_id,
        SETTINGS,
    )
    lab.started.append(process)
    return process


def runs(tokens: list[str]) -> dict[str, int]:
    """How many runs of each token's job ended, as the runs themselves wrote it."""
    counts = dict.fromkeys(tokens, 0)
    for token in Ledger.objects.filter(token__in=tokens, phase="done").values_list(
        "token", flat=True
    ):
        counts[token] += 1
    return counts


def shard_jobs(tokens: list[str]) -> list[Job]:
    return list(
        Job.objects.using("shard").filter(idempotency_key__in=[f"ledger:{t}" for t in tokens])
    )


@pytest.mark.timeout(180)
def test_shard_10_each_committed_enqueue_runs_once_across_databases_through_kills(lab):
    run = uuid.uuid4().hex[:8]
    late = [f"{run}-late-{i}" for i in range(3)]
    rolled_back = [f"{run}-open-{i}" for i in range(3)]
    worker = WorkerProcess("--queues", "reports", "--poll-interval", "100ms", SETTINGS)
    lab.started.append(worker)
    # the after-commit publish of the "late" batch, and relay A's publish, stop in their mark:
    # across databases the jobs' insert has committed by then
    lab.sleep_trigger(
        "hang_mark",
        "x_outbox",
        "UPDATE",
        "NEW.published_at IS NOT NULL AND OLD.published_at IS NULL AND ("
        "NEW.claimed_by = 'relay-a' OR "
        f"(NEW.claimed_by LIKE 'commit-%' AND NEW.idempotency_key LIKE '%{run}-late-%'))",
        seconds=60,
    )

    # 1. A producer killed inside its transaction: nothing staged, nothing anywhere.
    inside = producer(lab, [(rolled_back, True)])
    wait_for(lambda: any("open" in line for line in list(inside.out)), what="the open batch")
    kill_and_end_backend(inside)
    assert staged(rolled_back) == [] and committed(rolled_back) == set()

    # 2. A producer killed in its after-commit publish, between the insert and the mark: the jobs
    #    are in the shard (the worker runs them), their rows still unpublished.
    after = producer(lab, [(late, False)])
    kill_and_end_backend(after)
    assert committed(late) == set(late)
    wait_for(lambda: runs(late) == dict.fromkeys(late, 1), timeout=60, what="the late jobs to run")
    assert all(row.published_at is None for row in staged(late))

    # 3. Relay A takes the rows once the producer's claim lapses, and is killed in its mark: it
    #    published them again, into jobs that had already run.
    relay_a = relay(lab, "relay-a")
    kill_and_end_backend(relay_a)
    lab.drop_triggers()

    # 4. Relay B publishes what is left once relay A's claim lapses.
    relay_b = relay(lab, "relay-b")
    wait_for(
        lambda: all(row.published_at is not None for row in staged(late)),
        timeout=60,
        what="relay B to publish the late rows",
    )
    relay_b.send(signal.SIGTERM)
    code, _, err = relay_b.finish()
    assert code == 0, err

    everything = late + rolled_back
    # every committed enqueue ran once, and was written once, under its staged id, in the shard
    assert runs(everything) == {t: int(t in late) for t in everything}
    rows = staged(everything)
    assert {job.id for job in shard_jobs(everything)} == {row.id for row in rows}
    assert len(shard_jobs(everything)) == 3
    assert not Job.objects.using("default").filter(idempotency_key__startswith="ledger:").exists()
    assert OutboxEntry.objects.filter(published_at__isnull=True).count() == 0
    assert worker.proc.poll() is None
