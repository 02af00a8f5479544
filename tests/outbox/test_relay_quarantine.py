"""Issue 24 §1 with a real ``manage.py xjobs_relay`` process: a poisoned outbox row (a key no
live-key index entry can hold, written as another version or SQL would, past today's enqueue
checks) is quarantined, and the rows behind it are published in the same pass; the operator
lists it with ``manage.py xjobs outbox --json``, retries it once fixed, or discards it."""

from __future__ import annotations

import json
import secrets
import signal
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from django_xjobs.ids import uuid7
from django_xjobs.models import Job, OutboxEntry
from tests.support.process import ManageProcess, run_manage, wait_for

pytestmark = pytest.mark.process

#: the documented limit (django_xjobs.drivers.bounds.MAX_KEY_BYTES), spelt out so this case also runs,
#: and fails, on a version without it
MAX_KEY_BYTES = 1024


@pytest.fixture
def relays(transactional_db) -> Iterator[list[ManageProcess]]:
    started: list[ManageProcess] = []
    yield started
    for process in started:
        process.kill()


def insert(rows: list[tuple[str, str]], inputs: list[Any] | None = None) -> list[Any]:
    """Rows written straight into x_outbox in one transaction, in this order of (staged_at, id):
    ``(job, key)`` each, the key also the input unless ``inputs`` gives each row's."""
    base = timezone.now() - timedelta(seconds=1)
    ids = [uuid7() for _ in rows]
    given = inputs or [{"key": key[:20]} for _, key in rows]
    with transaction.atomic(), connection.cursor() as cursor:
        for index, (row_id, (job, key)) in enumerate(zip(ids, rows, strict=True)):
            cursor.execute(
                "INSERT INTO x_outbox (id, job, queue, input, idempotency_key, max_attempts,"
                " priority, run_at, staged_at) VALUES (%s, %s, 'default', %s::jsonb, %s, 3, 0,"
                " now(), %s)",
                [row_id, job, json.dumps(given[index]), key, base + timedelta(milliseconds=index)],
            )
    return ids


def xjobs_outbox(*args: str) -> str:
    done = run_manage("xjobs", "outbox", *args, "--settings=tests.settings")
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.timeout(180)
def test_a_poisoned_row_is_quarantined_and_the_four_behind_it_publish_in_the_same_pass(relays):
    poison = secrets.token_hex(1500)  # 3,000 bytes no index compression can save
    near = secrets.token_hex(MAX_KEY_BYTES // 2)  # 1,024 bytes, the limit: accepted, and publishes
    ids = insert(
        [
            ("tests.jobs.keyed", poison),
            ("tests.jobs.keyed", "behind:1"),
            ("tests.jobs.keyed", "behind:2"),
            ("tests.jobs.keyed", near),
            ("tests.jobs.keyed", "behind:4"),
        ]
    )
    bad, behind = ids[0], ids[1:]
    relay = ManageProcess(
        "xjobs_relay", "--batch-size", "10", "--interval", "100ms", "--relay-id", "relay-q"
    )
    relays.append(relay)

    wait_for(
        lambda: OutboxEntry.objects.filter(id__in=behind, published_at__isnull=False).count() == 4,
        timeout=60,
        what="the four rows behind it to be published",
    )
    wait_for(
        lambda: OutboxEntry.objects.filter(id=bad, quarantined_at__isnull=False).exists(),
        timeout=60,
        what="the poisoned row to be quarantined",
    )
    published = OutboxEntry.objects.filter(id__in=behind)
    # one claim stamped all of them: the same pass published them (a later pass claims anew)
    assert len({(e.claimed_by, e.claimed_at) for e in published}) == 1
    assert {e.claimed_by for e in published} == {"relay-q"}
    assert sorted(Job.objects.values_list("idempotency_key", flat=True)) == sorted(
        ["behind:1", "behind:2", near, "behind:4"]
    )
    entry = OutboxEntry.objects.get(id=bad)
    assert entry.error_code == "54000" and entry.published_at is None
    assert "index row size" in entry.error and "idempotency key 3,000 bytes" in entry.error
    assert relay.saw("xjobs.outbox.quarantined")
    assert not relay.saw("unavailable") and not relay.saw("DATABASE_URL")

    listed = json.loads(xjobs_outbox("--json"))
    assert listed["quarantined"] == 1 and listed["pending"] == 0
    [row] = listed["entries"]
    assert (row["id"], row["error_code"], row["key_bytes"]) == (str(bad), "54000", 3000)

    # the operator fixes the row, then retries it: the running relay publishes it
    OutboxEntry.objects.filter(id=bad).update(idempotency_key="fixed:0")
    assert "handed back" in xjobs_outbox("retry", str(bad))
    wait_for(
        lambda: Job.objects.filter(id=bad, idempotency_key="fixed:0").exists(),
        timeout=60,
        what="the fixed row to be published",
    )
    assert OutboxEntry.objects.get(id=bad).quarantined_at is None

    # another poisoned row: discarded, it never becomes a job
    [again] = insert([("tests.jobs.keyed", secrets.token_hex(1500))])
    wait_for(
        lambda: OutboxEntry.objects.filter(id=again, quarantined_at__isnull=False).exists(),
        timeout=60,
        what="the second poisoned row to be quarantined",
    )
    assert json.loads(xjobs_outbox("discard", str(again), "--json"))["quarantined"] == 0
    assert not OutboxEntry.objects.filter(id=again).exists()
    assert not Job.objects.filter(id=again).exists()

    relay.send(signal.SIGTERM)
    code, _, err = relay.finish()
    assert code == 0, err


@pytest.mark.timeout(180)
def test_outbox_21_rows_whose_limit_key_cannot_be_rendered_never_wedge_a_real_relay(relays):
    """Issue 40: an outbox row whose limit key cannot be rendered from its input (staged past
    the enqueue's checks: by another version, or before the template changed) made every
    publish raise without a SQLSTATE, and the relay handed the whole batch back on every pass
    (0 of the rows behind it published, 39 ``publish_failed`` lines in 8 s). Now it is
    quarantined with its code and the rows behind it publish in the same pass."""
    sharded = "tests.jobs.sharded"  # limit_key="shard-{account[id]}-{n:03d}"
    rows = [
        (sharded, "bad:type"),
        (sharded, "behind:1"),
        (sharded, "bad:value"),
        ("tests.jobs.keyed", "behind:2"),
        (sharded, "behind:3"),
        ("tests.jobs.keyed", "behind:4"),
    ]
    inputs = [
        {"account": "acme", "n": 1},  # a string has no item "id": TypeError
        {"account": {"id": 1}, "n": 1},
        {"account": {"id": 1}, "n": "two"},  # format code 'd' for a str: ValueError
        {"key": "behind:2"},
        {"account": {"id": 2}, "n": 3},
        {"key": "behind:4"},
    ]
    ids = insert(rows, inputs)
    bad, behind = [ids[0], ids[2]], [ids[1], ids[3], ids[4], ids[5]]
    relay = ManageProcess(
        "xjobs_relay", "--batch-size", "10", "--interval", "100ms", "--relay-id", "relay-l"
    )
    relays.append(relay)

    wait_for(
        lambda: OutboxEntry.objects.filter(id__in=bad, quarantined_at__isnull=False).count() == 2,
        timeout=60,
        what="both rows that cannot be built to be quarantined",
    )
    wait_for(
        lambda: OutboxEntry.objects.filter(id__in=behind, published_at__isnull=False).count() == 4,
        timeout=60,
        what="the four rows behind them to be published",
    )
    published = OutboxEntry.objects.filter(id__in=behind)
    # one claim stamped all of them: the same pass published them (a later pass claims anew)
    assert len({(e.claimed_by, e.claimed_at) for e in published}) == 1
    assert sorted(Job.objects.values_list("idempotency_key", flat=True)) == [
        "behind:1",
        "behind:2",
        "behind:3",
        "behind:4",
    ]
    keys = dict(Job.objects.filter(name=sharded).values_list("idempotency_key", "limit_key"))
    assert keys == {
        "behind:1": f"{sharded}\x1fshard-1-001",
        "behind:3": f"{sharded}\x1fshard-2-003",
    }
    assert relay.saw("xjobs.outbox.quarantined")
    assert not relay.saw("xjobs.outbox.publish_failed")

    listed = json.loads(xjobs_outbox("--json"))
    assert listed["quarantined"] == 2 and listed["pending"] == 0
    codes = {row["id"]: (row["error_code"], row["error"]) for row in listed["entries"]}
    assert codes[str(bad[0])][0] == codes[str(bad[1])][0] == "X_INPUT_INVALID"
    assert "TypeError" in codes[str(bad[0])][1] and "ValueError" in codes[str(bad[1])][1]

    # the operator fixes one input and retries it; the other is discarded
    OutboxEntry.objects.filter(id=bad[0]).update(input={"account": {"id": 9}, "n": 1})
    assert "handed back" in xjobs_outbox("retry", str(bad[0]))
    wait_for(
        lambda: Job.objects.filter(id=bad[0], limit_key=f"{sharded}\x1fshard-9-001").exists(),
        timeout=60,
        what="the fixed row to be published with its limit key",
    )
    assert json.loads(xjobs_outbox("discard", str(bad[1]), "--json"))["quarantined"] == 0
    assert not Job.objects.filter(id=bad[1]).exists()

    relay.send(signal.SIGTERM)
    code, _, err = relay.finish()
    assert code == 0, err
