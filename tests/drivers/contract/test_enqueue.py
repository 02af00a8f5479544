"""The driver contract, enqueue (SPEC DRV-04 table, DRV-05 gaps closed): the live set and its
dedupe namespace, and a new row's first state. Every case runs on the memory driver AND the PostgreSQL driver through the ``harness``
fixture, asserting the same answers."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from django_xjobs.drivers.contract import (
    Complete,
    SuspendUntil,
)
from django_xjobs.errors import InputInvalidError, InvariantError, JobDuplicateError
from tests import jobs
from tests.drivers.contract.support import claim, request

# --- (a) live set and dedupe namespace -------------------------------------------------------


def test_enq_06_live_key_dedupes_to_the_live_row(harness):
    first = jobs.ok.enqueue(n=1)
    again = jobs.ok.enqueue(n=1)
    assert not first.deduped
    assert again.deduped and (again.id, again.run_id) == (first.id, first.run_id)
    assert len(harness.driver.reads().list_jobs()) == 1


def test_enq_06_a_batchs_keys_are_stored_and_deduped_as_written(harness):
    """A batch's keys and ids travel as array parameters (binary on PostgreSQL): the characters
    the text array syntax gives meaning to, the word NULL, spaces and non-ASCII text are kept
    exactly, and the same batch again dedupes to the same rows, in order."""
    keys = ["plain", "a,b", "{braces}", 'quote"d', "back\\slash", "NULL", " spaced ", "é ünï"]
    first = harness.driver.jobs().enqueue_many([request(key=key) for key in keys])
    assert [harness.driver.reads().get_job(r.id).idempotency_key for r in first] == keys
    assert not any(r.deduped for r in first)
    again = harness.driver.jobs().enqueue_many([request(key=key) for key in reversed(keys)])
    assert [(r.id, r.run_id) for r in again] == [(r.id, r.run_id) for r in reversed(first)]
    assert all(r.deduped for r in again)


def test_enq_06_chunks_are_one_batch_in_order_deduped_across_chunks(harness):
    """enqueue_chunks answers as enqueue_many of the chunks joined: a key an earlier chunk
    inserted dedupes to that row, a live key to the live row, results in request order; an
    empty chunk adds nothing."""
    live = harness.driver.jobs().enqueue(request(key="live"))
    chunks = [
        [request(key="a"), request(key="b")],
        [request(key="a"), request(key="live"), request(key="c")],
        [request(key="b")],
    ]
    results = harness.driver.jobs().enqueue_chunks(iter([[], *chunks]))
    a, b, a_again, live_again, c, b_again = results
    assert [r.deduped for r in results] == [False, False, True, True, False, True]
    assert (a_again.id, b_again.id, live_again.id) == (a.id, b.id, live.id)
    assert [harness.driver.reads().get_job(r.id).idempotency_key for r in (a, b, c)] == [
        "a",
        "b",
        "c",
    ]
    assert len(harness.driver.reads().list_jobs()) == 4


def _failing_chunks():
    yield [request(key="a"), request(key="b")]
    yield [request(key="c")]
    raise InputInvalidError("inputs[3]: not a dict of inputs", hint="pass dicts")


def test_enq_06_a_chunk_that_fails_to_be_made_leaves_no_row_of_the_call(live_harness):
    """The chunks are one transaction: the chunks already written when a later one fails to be
    made (a bad input) are rolled back with it, on autocommit (live) connections."""
    with pytest.raises(InputInvalidError, match=r"inputs\[3\]"):
        live_harness.driver.jobs().enqueue_chunks(_failing_chunks())
    assert live_harness.driver.reads().list_jobs() == []
    again = live_harness.driver.jobs().enqueue_chunks(
        iter([[request(key="a")], [request(key="c")]])
    )
    assert [r.deduped for r in again] == [False, False]  # the connection is usable, keys free


def test_enq_06_chunks_take_plain_requests_only(harness):
    """A replace or a dependency decides row by row (enqueue_many): a chunk holding one is
    refused, and nothing of the call is written."""
    for odd in (replace(request(key="r"), replace=True), replace(request(key="r"), after=())):
        with pytest.raises(InvariantError, match="enqueue_chunks takes plain requests"):
            harness.driver.jobs().enqueue_chunks(
                iter([[request(key="a")], [request(key="b"), odd]])
            )
        assert harness.driver.reads().list_jobs() == []


@pytest.mark.parametrize("state_change", ["claimed", "suspended"])
def test_enq_06_running_and_suspended_rows_are_live(harness, state_change):
    first = jobs.ok.enqueue(n=1)
    [held] = claim(harness.driver)
    if state_change == "suspended":
        assert harness.driver.runs().suspend(SuspendUntil(held.id, held.lease_token))
    assert jobs.ok.enqueue(n=1).id == first.id


def test_enq_07_on_conflict_error_names_the_live_job(harness):
    first = jobs.ok.enqueue(n=1)
    with pytest.raises(JobDuplicateError) as caught:
        jobs.ok.using(on_conflict="error").enqueue(n=1)
    assert str(first.id) in str(caught.value)
    assert caught.value.code == "X_JOB_DUPLICATE"


def test_enq_08_a_terminal_row_frees_the_key(harness):
    first = jobs.ok.enqueue(n=1)
    [held] = claim(harness.driver)
    assert harness.driver.runs().complete([Complete(held.id, held.lease_token)]) == {held.id}
    second = jobs.ok.enqueue(n=1)
    assert not second.deduped and second.id != first.id


def test_enq_09_se_01_the_namespace_includes_the_job_name(harness):
    a = harness.driver.jobs().enqueue(request(name="tests.jobs.ok", key="same"))
    b = harness.driver.jobs().enqueue(request(name="tests.jobs.fails", key="same"))
    assert not b.deduped and a.id != b.id


def test_enq_10_se_02_the_namespace_includes_the_tenant(harness):
    a = harness.driver.jobs().enqueue(request(tenant="acme", key="same"))
    b = harness.driver.jobs().enqueue(request(tenant="globex", key="same"))
    none_1 = harness.driver.jobs().enqueue(request(tenant=None, key="same"))
    none_2 = harness.driver.jobs().enqueue(request(tenant=None, key="same"))
    assert len({a.id, b.id, none_1.id}) == 3
    assert none_2.deduped and none_2.id == none_1.id


@pytest.mark.parametrize("verb", ["enqueue", "enqueue_many", "after"])
def test_enq_10_se_02_a_named_tenants_key_dedupes_to_that_tenants_row(harness, verb):
    """The same name and key live under four tenants (three named, and none); each one's key
    enqueued again answers its own tenant's row, never a neighbour's: one by one, as a batch,
    and with a dependency (``using(after=...)``). The insert is suppressed by the unique index
    either way; which live row is answered is the lookup's to decide (``find_live``,
    ``find_live_many`` on PostgreSQL), so its tenant condition is pinned here."""
    tenants = ["acme", None, "globex", "zeta"]
    dependency = harness.driver.jobs().enqueue(request(key="dependency")).id
    first = harness.driver.jobs().enqueue_many([request(tenant=t, key="same") for t in tenants])
    assert not any(r.deduped for r in first) and len({r.id for r in first}) == len(tenants)
    again = [request(tenant=t, key="same") for t in reversed(tenants)]
    if verb == "enqueue":
        answers = [harness.driver.jobs().enqueue(r) for r in again]
    elif verb == "enqueue_many":
        answers = harness.driver.jobs().enqueue_many(again)
    else:
        answers = [harness.driver.jobs().enqueue(replace(r, after=(dependency,))) for r in again]
    assert all(r.deduped for r in answers)
    assert [(r.id, r.run_id) for r in answers] == [(r.id, r.run_id) for r in reversed(first)]
    assert [harness.row(r.id).tenant_id for r in answers] == list(reversed(tenants))
    assert len(harness.driver.reads().list_jobs()) == len(tenants) + 1


# --- (b) initial state -----------------------------------------------------------------------


def test_enq_05_initial_state_ready_or_delayed(harness):
    now_row = harness.row(jobs.ok.enqueue(n=1).id)
    later_row = harness.row(jobs.ok.using(delay="1h").enqueue(n=2).id)
    assert (now_row.state, now_row.attempt) == ("ready", 0)
    assert (later_row.state, later_row.attempt) == ("delayed", 0)
    assert later_row.run_at - now_row.run_at >= timedelta(minutes=59)
    assert now_row.run_id != later_row.run_id


def test_enq_03_the_row_carries_the_declaration(harness):
    handle = jobs.important.using(enqueued_by="user:7", tenant_id="acme")
    row = harness.row(handle.enqueue(n=3).id)
    assert row.name == "tests.jobs.important"
    assert row.queue == "default"
    assert row.input == {"n": 3}
    assert row.idempotency_key == "prio:3"
    assert row.max_attempts == 3
    assert row.priority == 5
    assert (row.tenant_id, row.enqueued_by) == ("acme", "user:7")


def test_run_at_schedules_at_that_instant(harness):
    when = timezone.now() + timedelta(days=2)
    row = harness.row(jobs.ok.using(run_at=when).enqueue(n=1).id)
    assert row.state == "delayed"
    assert abs((row.run_at - when).total_seconds()) < 0.001


def test_dep_05_a_job_waited_for_by_as_many_as_one_may_takes_no_more(harness, monkeypatch):
    """Issue 40: dependants had no cap: every one is named in the dependency's row, which each
    settle of it reads and rewrites. Past ``rules.MAX_DEPENDANTS`` (10,000; 2 here) an enqueue
    naming it is refused with ``X_INPUT_INVALID`` and writes nothing, on both drivers; a staged
    one is quarantined at its publish (the code is a refusal of the row, OUTBOX-21)."""
    from django_xjobs.drivers import rules

    monkeypatch.setattr(rules, "MAX_DEPENDANTS", 2, raising=False)  # runs on any version
    first = jobs.ok.enqueue(n=1).id
    waiting = [jobs.ok.using(after=[first]).enqueue(n=n).id for n in (2, 3)]
    with pytest.raises(InputInvalidError) as caught:
        jobs.ok.using(after=[first]).enqueue(n=4)
    assert caught.value.meta == {"field": "after", "limit": 2}
    assert str(first) in caught.value.message
    assert harness.row(first).dependants == tuple(waiting)
    assert len(harness.driver.reads().list_jobs(limit=10)) == 3
    other = jobs.ok.enqueue(n=5).id  # another dependency takes its own
    assert harness.row(jobs.ok.using(after=[other]).enqueue(n=6).id).state == "suspended"
