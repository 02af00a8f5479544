"""Issue 40 (High): the relay wedged through a new door. A limit key was rendered only when its
job's row was inserted, so an enqueue inside ``atomic()`` staged inputs that could not fill it
(``"{account[id]}"`` given a string: TypeError; ``"{n:03d}"`` given a string: ValueError), and
every publish raised, without a SQLSTATE, and handed the whole batch back.

Every value the publish derives from a request (the limit key, the fair-share group, the jobs it
waits for) is decided at enqueue on every path with its coded error (SPEC OUTBOX-21,
LIMIT-19), and a staged row that got past those checks (written by another version, by SQL, or
under a template changed since) is quarantined while the rows behind it publish in the same
pass, on both drivers. The process case (a real relay) is in tests/outbox/test_relay_quarantine.py.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from types import SimpleNamespace

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from django_xjobs import Batch, DependencyCycleError, inspect_outbox
from django_xjobs.drivers.contract import EnqueueRequest
from django_xjobs.errors import InputInvalidError
from django_xjobs.ids import uuid7
from django_xjobs.outbox.relay import publish_visible
from django_xjobs.run import enqueue, publish
from django_xjobs.run.publish import publish_batch
from django_xjobs.scheduler.role import _occurrence_request
from tests import jobs, tasks

AUTO = {"QUEUES": ["other", "limited"], "POLL_INTERVAL": 0.2, "OUTBOX": "auto"}
#: the documented bounds (limits.keys.MAX_RENDERED_BYTES, bounds.MAX_AFTER), spelt out so these
#: cases also run, and fail, on a version without them
MAX_RENDERED_BYTES = 1024
MAX_AFTER = 1000

#: inputs the sharded job's limit key ("shard-{account[id]}-{n:03d}") cannot be rendered from
UNRENDERABLE = [
    ({"account": "acme", "n": 1}, "TypeError"),  # a string has no item "id"
    ({"account": {"id": 7}, "n": "one"}, "ValueError"),  # format code 'd' for a str
    ({"n": 1}, "TypeError"),  # account left None: not subscriptable
]


def staged_request(name: str, payload: dict, *, key: str, after=None, id=None) -> EnqueueRequest:
    """A request built past the enqueue checks, as another version or SQL would stage it."""
    return EnqueueRequest(
        name=name,
        queue="limited" if name == jobs.sharded.name else "default",
        input=payload,
        input_json=json.dumps(payload),
        idempotency_key=key,
        max_attempts=3,
        after=after,
        id=id,
    )


def count_jobs(harness) -> int:
    return len(harness.driver.reads().list_jobs(limit=1000))


# --- at enqueue, on every path ------------------------------------------------------------


@pytest.mark.parametrize(("inputs", "kind"), UNRENDERABLE)
def test_outbox_21_an_unrenderable_limit_key_is_refused_directly_with_its_code(
    harness, inputs, kind
):
    with pytest.raises(InputInvalidError) as caught:
        jobs.sharded.enqueue(**inputs)
    assert caught.value.code == "X_INPUT_INVALID"
    assert "limit_key='shard-{account[id]}-{n:03d}'" in caught.value.message
    assert kind in caught.value.message
    assert count_jobs(harness) == 0
    good = jobs.sharded.enqueue(account={"id": 7}, n=1)
    assert harness.row(good.id).state == "ready"


def test_outbox_21_inside_atomic_nothing_is_staged_and_the_transaction_goes_on(harness):
    with override_settings(XJOBS=AUTO):
        with transaction.atomic():
            for inputs, _ in UNRENDERABLE:
                with pytest.raises(InputInvalidError, match="limit_key"):
                    jobs.sharded.enqueue(**inputs)
            with pytest.raises(InputInvalidError, match=r"^X_INPUT_INVALID: inputs\[1\]"):
                # the whole call is refused before its first row is staged
                jobs.sharded.enqueue_many([{"account": {"id": 1}, "n": 1}, {"account": "x"}])
            fine = jobs.sharded.enqueue(account={"id": 1}, n=2)
            assert fine.staged
        publish_visible(harness.driver, "relay-t")
    assert harness.driver.outbox("default").quarantine.count() == 0
    assert [r.id for r in harness.driver.reads().list_jobs()] == [fine.id]


def test_outbox_21_enqueue_many_names_the_element_and_writes_nothing(harness):
    with pytest.raises(InputInvalidError) as caught:
        jobs.sharded.enqueue_many([{"account": {"id": 1}, "n": 1}, {"account": "acme", "n": 2}])
    assert caught.value.message.startswith("inputs[1]: ")
    assert count_jobs(harness) == 0


def test_outbox_21_a_batch_member_and_a_cron_occurrence_are_refused(harness):
    with pytest.raises(InputInvalidError, match="limit_key"), Batch() as batch:
        batch.add(jobs.sharded, account="acme", n=1)
    handle = SimpleNamespace(name="tests.bad_shard_cron")
    with pytest.raises(InputInvalidError, match="limit_key"):
        _occurrence_request(handle, jobs.sharded, {"account": "acme"}, timezone.now())
    assert count_jobs(harness) == 0


def test_limit_19_a_limit_key_over_its_byte_limit_is_refused_staged_or_not(harness):
    """A 10 KB limit key was staged (only its publish was refused); the rendered part is
    bounded like an idempotency key, in bytes. The job's idempotency key ("sharded:{n}") stays
    short: only the limit key is over."""
    big = {"id": "a" * 10_000}
    with pytest.raises(InputInvalidError) as caught:
        jobs.sharded.enqueue(account=big, n=1)
    assert caught.value.meta == {"field": "limit_key", "limit": MAX_RENDERED_BYTES, "size": 10_010}
    assert "10,010 bytes; at most 1,024" in caught.value.message
    with (
        override_settings(XJOBS=AUTO),
        transaction.atomic(),
        pytest.raises(InputInvalidError, match="limit_key rendered"),
    ):
        jobs.sharded.enqueue(account={"id": "é" * 600}, n=2)  # 600 characters, 1,200 bytes
    fits = jobs.sharded.enqueue(account={"id": "a" * (MAX_RENDERED_BYTES - 10)}, n=3)
    assert harness.row(fits.id).state == "ready"
    assert count_jobs(harness) == 1


def test_limit_19_a_fair_share_group_too_large_is_refused_and_one_that_cannot_render_is_none(
    harness,
):
    """The django.tasks backend's only derived key is the fair-share group: a task's call is
    checked like a job's (a group over the limit refused at enqueue), and a template the call
    cannot fill puts the run in the group of runs without one, as a missing input always did."""
    share = {**AUTO, "FAIR_SHARE": "{args[0]}"}
    with override_settings(XJOBS=share):
        with transaction.atomic():
            with pytest.raises(InputInvalidError, match="fair-share group"):
                tasks.add.enqueue("x" * 5000, 2)
            kept = tasks.add.enqueue({"id": 1}, 2)
        publish_visible(harness.driver, "relay-t")
        with override_settings(XJOBS={**share, "FAIR_SHARE": "{args[0][id]:05d}"}):
            with transaction.atomic():
                odd = tasks.add.enqueue("not-a-dict", 2)
            publish_visible(harness.driver, "relay-t")
    assert harness.driver.outbox("default").quarantine.count() == 0
    assert {harness.row(uuid.UUID(r.id)).state for r in (kept, odd)} == {"ready"}


def test_outbox_21_a_staged_job_waiting_for_itself_or_too_many_is_refused(harness):
    own = uuid.uuid4()
    request = jobs.ok.using(after=[own]).build_request({"n": 1})
    with override_settings(XJOBS=AUTO), transaction.atomic():
        with pytest.raises(DependencyCycleError):
            enqueue.submit(replace(request, id=own), outbox=None, on_conflict="dedupe")
        many = [uuid.uuid4() for _ in range(MAX_AFTER + 1)]
        with pytest.raises(InputInvalidError, match="after names 1,001 jobs; at most 1,000"):
            jobs.ok.using(after=many).enqueue(n=2)
    assert harness.driver.outbox("default").pending()[0] == 0


# --- at publish: the row that cannot be built is quarantined, the rest publish --------------


def test_outbox_21_rows_that_cannot_be_built_are_quarantined_and_the_rest_publish(harness):
    store = harness.driver.outbox("default")
    own = uuid7()
    ids = [
        store.stage(staged_request(jobs.sharded.name, {"account": "acme", "n": 1}, key="bad:1")),
        store.stage(staged_request(jobs.ok.name, {"n": 1}, key="ok:1")),
        store.stage(staged_request(jobs.ok.name, {"n": 2}, key="self", after=(own,), id=own)),
        store.stage(staged_request(jobs.sharded.name, {"account": {"id": 1}, "n": 2}, key="s:2")),
        store.stage(staged_request(jobs.per_account.name, {"account": "a" * 10_000}, key="big:1")),
        store.stage(staged_request(jobs.sharded.name, {"account": {"id": 1}, "n": "x"}, key="b2")),
        store.stage(staged_request(jobs.ok.name, {"n": 3}, key="ok:3")),
    ]
    rows = store.claim(100, "relay-a")
    assert {r.id for r in rows} == set(ids)
    assert publish_batch(store, harness.driver, rows, "relay-a") == 3  # in the same pass
    assert sorted(r.idempotency_key for r in harness.driver.reads().list_jobs()) == [
        "ok:1",
        "ok:3",
        "s:2",
    ]
    [sharded] = [r for r in harness.driver.reads().list_jobs() if r.name == jobs.sharded.name]
    entries = {e["id"]: e for e in inspect_outbox()["entries"]}
    assert set(entries) == {str(ids[i]) for i in (0, 2, 4, 5)}
    assert entries[str(ids[0])]["error_code"] == "X_INPUT_INVALID"
    assert "TypeError" in entries[str(ids[0])]["error"]
    assert entries[str(ids[2])]["error_code"] == "X_DEPENDENCY_CYCLE"
    assert "10,000 bytes" in entries[str(ids[4])]["error"]
    assert "ValueError" in entries[str(ids[5])]["error"]
    assert store.claim(100, "relay-b") == []  # the quarantined rows stay out of later passes
    assert sharded.state == "ready"


def test_outbox_21_a_row_refused_by_the_store_while_it_builds_is_quarantined(harness, monkeypatch):
    """What the store raises building a row from its values (here a job given itself to wait
    for, the check the publish's own pass was made to skip) is a refusal of that row: the
    batch is bisected (one transaction) or walked, and the rows around it publish."""
    store = harness.driver.outbox("default")
    before = store.stage(staged_request(jobs.ok.name, {"n": 1}, key="before"))
    own = uuid7()
    store.stage(staged_request(jobs.ok.name, {"n": 2}, key="self", after=(own,), id=own))
    after = store.stage(staged_request(jobs.ok.name, {"n": 3}, key="after"))
    rows = store.claim(100, "relay-a")
    # as if the row had passed the publish's own check: the store is what refuses it now
    monkeypatch.setattr(publish, "_buildable", lambda store, rows, token: rows)
    assert publish_batch(store, harness.driver, rows, "relay-a") == 2
    assert {r.id for r in harness.driver.reads().list_jobs()} == {before, after}
    [entry] = inspect_outbox()["entries"]
    assert (entry["id"], entry["error_code"]) == (str(own), "X_DEPENDENCY_CYCLE")
