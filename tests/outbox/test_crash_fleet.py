"""Each committed enqueue becomes exactly one job when the processes around the outbox are
SIGKILLed (issue 12 item 7, SPEC OUTBOX-09/12): a producer killed inside its transaction, a
producer killed in its after-commit publish, and a relay killed in its publish.

The producer writes a ledger row in the same transaction as its enqueues, so "committed" is read
from the ledger, not assumed. Kill points are pinned with a trigger that ``pg_sleep``s inside the
mark; every wait is a poll with a deadline.
"""

from __future__ import annotations

import signal
import uuid

import pytest

from django_xjobs.models import Job, OutboxEntry
from tests.models import Ledger
from tests.outbox import test_relay_fleet
from tests.outbox.test_relay_fleet import Lab, backends, execute
from tests.support.process import ManageProcess, wait_for

pytestmark = pytest.mark.process
lab = test_relay_fleet.lab  # the fixture: relays killed, sleeping backends ended, triggers dropped

#: ``manage.py shell -c``: enqueue through the outbox in one transaction per batch, with a ledger
#: row per enqueue in the same transaction; a batch marked "open" stops inside its transaction.
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
            jobs.ledger.enqueue(token=token)
            Ledger.objects.create(token=token, phase="committed", attempt=0, pid=os.getpid())
        if hold_open:
            print("open", flush=True)
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_sleep(60)")
    print("committed", len(tokens), flush=True)
"""


def producer(lab: Lab, batches: list[tuple[list[str], bool]]) -> ManageProcess:
    process = ManageProcess("shell", "-c", PRODUCER.replace("BATCHES", repr(batches)))
    lab.started.append(process)  # killed at teardown with the relays
    return process


def sleeping() -> list[int]:
    return backends("wait_event = 'PgSleep'")


def kill_and_end_backend(process: ManageProcess) -> None:
    """SIGKILL ``process`` and end its sleeping statement: a killed client's backend only
    notices at its next write."""
    [pid] = wait_for(sleeping, what="the process to stop at its kill point")
    process.send(signal.SIGKILL)
    process.finish()
    execute("SELECT pg_terminate_backend(%s)", [pid])
    wait_for(lambda: pid not in backends("true"), what="its backend to go")


def jobs_for(tokens: list[str]) -> dict[str, int]:
    keys = {f"ledger:{token}": token for token in tokens}
    counts = dict.fromkeys(tokens, 0)
    for key in Job.objects.filter(idempotency_key__in=keys).values_list(
        "idempotency_key", flat=True
    ):
        counts[keys[key]] += 1
    return counts


def staged(tokens: list[str]) -> list[OutboxEntry]:
    return list(OutboxEntry.objects.filter(idempotency_key__in=[f"ledger:{t}" for t in tokens]))


def committed(tokens: list[str]) -> set[str]:
    rows = Ledger.objects.filter(token__in=tokens, phase="committed")
    return set(rows.values_list("token", flat=True))


@pytest.mark.timeout(120)
def test_outbox_09_12_every_committed_enqueue_is_one_job_through_producer_and_relay_kills(lab):
    run = uuid.uuid4().hex[:8]
    published = [f"{run}-pub-{i}" for i in range(3)]
    late = [f"{run}-late-{i}" for i in range(3)]
    rolled_back = [f"{run}-open-{i}" for i in range(3)]
    # The after-commit publish of the "late" batch, and relay A's publish, stop in their mark
    # (the job insert is in the same transaction, not yet committed) until they are killed.
    lab.sleep_trigger(
        "hang_publish",
        "x_outbox",
        "UPDATE",
        "NEW.published_at IS NOT NULL AND OLD.published_at IS NULL AND ("
        "NEW.claimed_by = 'relay-a' OR "
        f"(NEW.claimed_by LIKE 'commit-%' AND NEW.idempotency_key LIKE '%{run}-late-%'))",
        seconds=60,
    )

    # 1. A producer SIGKILLed inside its transaction: its staged rows vanish with it.
    inside = producer(lab, [(rolled_back, True)])
    wait_for(lambda: any("open" in line for line in list(inside.out)), what="the open batch")
    kill_and_end_backend(inside)
    assert staged(rolled_back) == [] and committed(rolled_back) == set()

    # 2. A producer SIGKILLed in its after-commit publish: the rows are committed, unpublished.
    after = producer(lab, [(published, False), (late, False)])
    kill_and_end_backend(after)
    assert committed(published + late) == set(published + late)
    assert jobs_for(published) == dict.fromkeys(published, 1)  # the fast path published them
    assert jobs_for(late) == dict.fromkeys(late, 0)  # its insert rolled back with the mark
    assert all(row.published_at is None for row in staged(late))

    # 3. Relay A re-claims them once the producer's claim lapses, and is SIGKILLed in its publish.
    relay_a = lab.relay("--claim-lease", "2s", "--interval", "100ms", "--relay-id", "relay-a")
    kill_and_end_backend(relay_a)
    assert jobs_for(late) == dict.fromkeys(late, 0)
    lab.drop_triggers()

    # 4. Relay B publishes what is left once relay A's claim lapses.
    relay_b = lab.relay("--claim-lease", "2s", "--interval", "100ms", "--relay-id", "relay-b")
    wait_for(
        lambda: all(row.published_at is not None for row in staged(late)),
        timeout=60,
        what="relay B to publish the late rows",
    )
    relay_b.send(signal.SIGTERM)
    code, _, err = relay_b.finish()
    assert code == 0, err

    everything = published + late + rolled_back
    assert committed(everything) == set(published + late)
    assert jobs_for(everything) == {t: int(t in committed(everything)) for t in everything}
    rows = staged(everything)
    assert len(rows) == 6 and all(row.published_at is not None for row in rows)
    ids = set(
        Job.objects.filter(idempotency_key__in=[r.idempotency_key for r in rows]).values_list(
            "id", flat=True
        )
    )
    assert ids == {row.id for row in rows}, "each job is its staged row, by id"
