"""The driver contract, the outbox's quarantine (issue 24; SPEC OUTBOX-10, OUTBOX-13): the
``QuarantineStore`` an outbox store answers as ``store.quarantine`` holds a claimed row out of
every batch, fenced on the claimer's id, lists and counts what it holds, and hands a row back or
deletes it on an operator's word. Every case runs on the memory driver AND the PostgreSQL driver
through the ``harness`` fixture, asserting the same answers."""

from __future__ import annotations

from tests import jobs


def stage(harness, n):
    store = harness.driver.outbox("default")
    return [store.stage(jobs.ok.build_request({"n": i})) for i in range(n)]


def test_outbox_13_a_row_is_held_only_while_its_claimer_holds_it(harness):
    store = harness.driver.outbox("default")
    first, second = stage(harness, 2)
    store.claim(10, "relay-a")
    assert store.quarantine.hold(first, "relay-stale", "22001", "refused") is False
    assert store.quarantine.count() == 0
    assert store.quarantine.hold(first, "relay-a", "22001", "refused") is True
    assert store.quarantine.hold(first, "relay-a", "22001", "refused") is False  # not ours now
    assert store.quarantine.count() == 1
    assert store.release([first, second], "relay-a") == 1  # only the other row is still claimed
    assert [r.id for r in store.claim(10, "relay-b")] == [second]  # left out of every batch
    assert store.pending()[0] == 1  # and out of the backlog


def test_outbox_10_the_quarantine_lists_what_it_holds_oldest_first(harness):
    store = harness.driver.outbox("default")
    ids = stage(harness, 3)
    store.claim(10, "relay-a")
    for row_id in ids:
        assert store.quarantine.hold(row_id, "relay-a", "54000", f"row {row_id}")
    rows = store.quarantine.rows()
    assert [r.id for r in rows] == ids
    assert [r.id for r in store.quarantine.rows(limit=2)] == ids[:2]
    row = rows[0]
    assert (row.job, row.queue, row.error_code, row.error) == (
        "tests.jobs.ok",
        "default",
        "54000",
        f"row {ids[0]}",
    )
    assert (row.key_bytes, row.tenant_bytes, row.name_bytes) == (
        len(row.idempotency_key),
        None,
        len("tests.jobs.ok"),
    )
    assert row.quarantined_at >= row.staged_at
    assert store.quarantine.count() == 3


def test_outbox_10_a_retry_hands_the_row_back_unclaimed_and_a_discard_deletes_it(harness):
    store = harness.driver.outbox("default")
    kept, dropped = stage(harness, 2)
    store.claim(10, "relay-a")
    assert store.quarantine.hold(kept, "relay-a", "22001", "refused")
    assert store.quarantine.hold(dropped, "relay-a", "22001", "refused")
    assert store.quarantine.retry(kept) is True
    assert store.quarantine.retry(kept) is False  # no longer quarantined
    [again] = store.claim(10, "relay-b")  # back in the relay's batches, free to claim
    assert (again.id, again.claimed_by) == (kept, "relay-b")
    assert store.quarantine.discard(kept) is False  # a claimed row is no quarantined one
    assert store.quarantine.discard(dropped) is True
    assert store.quarantine.discard(dropped) is False
    assert store.quarantine.retry(dropped) is False  # gone: nothing to hand back
    assert (store.quarantine.count(), store.quarantine.rows()) == (0, [])
    assert store.claim(10, "relay-c") == []  # the discarded row never comes back
