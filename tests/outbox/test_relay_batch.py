"""The relay publishes a claimed batch on the jobs' own database as one transaction: the mark of
the rows it still holds, their jobs and any collapse commit together, or none of it does.
(SPEC OUTBOX-09/10/12; the row-by-row publish of other stores is pinned in
tests/outbox/test_outbox.py.)
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_xjobs.models import Job, OutboxEntry
from django_xjobs.run.publish import publish_batch
from tests import jobs


@pytest.fixture
def live_postgres(transactional_db):
    from django_xjobs.drivers import install, uninstall
    from django_xjobs.drivers.postgres import PostgresDriver

    driver = PostgresDriver("default")
    install(driver)
    yield driver
    uninstall(driver)


def stage(store, *ns):
    return [store.stage(jobs.ok.build_request({"n": n})) for n in ns]


def test_outbox_09_a_batch_costs_the_same_statements_whatever_its_size(live_postgres):
    store = live_postgres.outbox("default")
    counts = []
    for ns in ([1, 2], range(10, 30)):
        ids = stage(store, *ns)
        rows = store.claim(100, "relay-a")
        with CaptureQueriesContext(connection) as queries:
            assert publish_batch(store, live_postgres, rows, "relay-a") == len(ids)
        counts.append(len(queries))
        assert set(Job.objects.filter(id__in=ids).values_list("id", flat=True)) == set(ids)
    assert counts[0] == counts[1]
    assert store.pending()[0] == 0
    assert set(OutboxEntry.objects.values_list("job_id", flat=True)) == set(
        OutboxEntry.objects.values_list("id", flat=True)
    )


def test_outbox_10_a_failed_batch_publishes_nothing_and_hands_every_row_back(
    live_postgres, monkeypatch, caplog
):
    store = live_postgres.outbox("default")
    ids = stage(store, 1, 2, 3)
    rows = store.claim(10, "relay-a")

    def down(requests):
        raise ConnectionError("down")

    monkeypatch.setattr(live_postgres, "enqueue_many", down)
    assert publish_batch(store, live_postgres, rows, "relay-a") == 0
    assert not Job.objects.exists()
    assert "xjobs.outbox.publish_failed" in caplog.text and "remaining=3" in caplog.text
    entries = OutboxEntry.objects.filter(id__in=ids)
    assert all(e.published_at is None and e.claimed_by is None for e in entries)  # rolled back
    monkeypatch.undo()
    again = store.claim(10, "relay-b")  # released at once, not after the lease
    assert [r.id for r in again] == ids
    assert publish_batch(store, live_postgres, again, "relay-b") == 3


def test_outbox_12_a_row_another_relay_took_is_neither_marked_nor_inserted(live_postgres, caplog):
    store = live_postgres.outbox("default")
    ids = stage(store, 1, 2)
    stale = store.claim(10, "relay-a")
    # relay-a's lease on the second row lapses and relay-b takes it
    OutboxEntry.objects.filter(id=ids[1]).update(
        claimed_at=OutboxEntry.objects.get(id=ids[1]).claimed_at - timedelta(hours=1)
    )
    [taken] = store.claim(10, "relay-b")
    assert taken.id == ids[1]
    with caplog.at_level(logging.INFO, logger="django_xjobs"):
        assert publish_batch(store, live_postgres, stale, "relay-a") == 1
    assert list(Job.objects.values_list("id", flat=True)) == [ids[0]]
    assert "xjobs.outbox.mark_refused" in caplog.text
    assert publish_batch(store, live_postgres, [taken], "relay-b") == 1
    assert set(Job.objects.values_list("id", flat=True)) == set(ids)
    assert store.pending()[0] == 0


def test_outbox_12_a_batch_row_that_collapses_answers_for_the_live_job(live_postgres):
    store = live_postgres.outbox("default")
    live = live_postgres.jobs().enqueue(jobs.ok.build_request({"n": 7}))
    [staged, fresh] = stage(store, 7, 8)
    rows = store.claim(10, "relay-a")
    assert publish_batch(store, live_postgres, rows, "relay-a") == 2
    assert store.resolve(staged) == live.id
    assert store.resolve(fresh) is None
    assert sorted(map(str, Job.objects.values_list("id", flat=True))) == sorted(
        [str(live.id), str(fresh)]
    )
