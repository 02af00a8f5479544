"""A job's expiry and replace, staged in the outbox, published exactly as a direct enqueue would
have written them: on the fast path at commit and through the relay, on both drivers (SPEC
JCTL-08, OUTBOX-02; issue 29).

On PostgreSQL the fast path inserts plain rows in one statement (outbox.sql ``publish_taken``),
which computes the expiry itself; a row staged to replace goes through the driver's enqueue, the
relay through its ``enqueue_many``, and a commit on another database through the cross-database
publish. Each is pinned here."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from django_xjobs.models import Job, OutboxEntry
from django_xjobs.operations import inspect_job
from django_xjobs.outbox.relay import Relay
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.models import Ledger

AUTO = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "auto"}
#: how a staged row reaches the job store: the on-commit fast path, or committed rows the relay
#: claims (the fast path never ran for them)
PATHS = ("fast", "relay")


@pytest.fixture
def live(live_harness):
    with override_settings(XJOBS=AUTO):
        yield live_harness


def stage(live, path, enqueues):
    """Stage each ``(handle, inputs)`` in one transaction and publish it by ``path``; the
    staged ids, in order."""
    if path == "fast":
        with transaction.atomic():
            results = [handle.enqueue(**inputs) for handle, inputs in enqueues]
        assert all(result.staged for result in results)
        return [result.id for result in results]
    store = live.driver.outbox("default")
    ids = [store.stage(handle.build_request(inputs)) for handle, inputs in enqueues]
    assert live.driver.reads().get_job(ids[0]) is None  # staged only: nothing published it yet
    assert Relay(store=store, driver=live.driver).tick() == len(ids)
    return ids


def ledger(prefix):
    rows = Ledger.objects.filter(token__startswith=prefix)
    return sorted(rows.values_list("token", flat=True))


def window(row):
    return row.expires_at - row.run_at


@pytest.mark.parametrize("path", PATHS)
def test_jctl_08_a_staged_expiry_is_the_direct_one(live, path):
    """``expires_in`` counted from when the job falls due (a delayed one keeps its window) and
    ``expires_at`` as given: stored alike, and an expired staged job never runs, as a direct one
    (SPEC JCTL-01)."""
    at = timezone.now() + timedelta(seconds=5)
    handles = {
        "now": jobs.expiring,
        "later": jobs.expiring.using(delay="1h"),
        "at": jobs.expiring.using(expires_at=at),
    }
    direct = {
        kind: handle.using(outbox=False).enqueue(token=f"x8-direct-{kind}").id
        for kind, handle in handles.items()
    }
    staged = dict(
        zip(
            handles,
            stage(live, path, [(h, {"token": f"x8-staged-{k}"}) for k, h in handles.items()]),
            strict=True,
        )
    )
    rows = {kind: (live.row(direct[kind]), live.row(staged[kind])) for kind in handles}
    for kind in ("now", "later"):
        assert [window(row) for row in rows[kind]] == [timedelta(minutes=10)] * 2, kind
    assert [row.expires_at for row in rows["at"]] == [at, at]
    live.advance(601)  # past the expiries of "now" and "at"; "later" is not due yet
    run_until_idle()
    for kind in ("now", "at"):
        for row in (live.row(direct[kind]), live.row(staged[kind])):
            assert (row.state, row.stop_reason) == ("dead", "expired"), kind
    assert ledger("x8-") == []
    live.advance(3000)  # "later" fell due a second ago: well inside its window
    run_until_idle()
    assert ledger("x8-") == ["x8-direct-later", "x8-staged-later"]


@pytest.mark.parametrize("path", PATHS)
def test_jctl_08_a_staged_replace_updates_the_waiting_holder(live, path):
    """SPEC JCTL-06 through the outbox: the waiting holder takes the staged input and run
    time; the staged id resolves to the holder."""
    holder = jobs.debounced.using(delay="1h").enqueue(doc=81, edit=1)  # outside atomic: direct
    assert not holder.staged
    when = timezone.now() + timedelta(minutes=2)
    [staged] = stage(live, path, [(jobs.debounced.using(run_at=when), {"doc": 81, "edit": 2})])
    row = live.row(holder.id)
    assert (row.input, row.run_at, row.state) == ({"doc": 81, "edit": 2}, when, "delayed")
    assert live.row(staged) is None
    assert inspect_job(staged)["id"] == str(holder.id)
    assert [j.id for j in live.driver.reads().list_jobs(name="tests.jobs.debounced")] == [holder.id]


def test_jctl_08_a_staged_replace_leaves_a_started_holder_alone(live):
    holder = jobs.debounced.using(delay=0).enqueue(doc=82, edit=1)
    [held] = live.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id="w"
    )
    assert held.id == holder.id
    [staged] = stage(live, "fast", [(jobs.debounced, {"doc": 82, "edit": 2})])
    assert live.row(holder.id).input == {"doc": 82, "edit": 1}
    assert inspect_job(staged)["id"] == str(holder.id)  # deduped to the running job


def test_jctl_08_rows_sharing_a_replaced_key_publish_in_stage_order(live):
    """One transaction stages a replace, then a plain enqueue of the same key: the replace
    makes the job and the plain one dedupes to it, as two direct enqueues would; the plain row
    is not inserted ahead of the replace it followed."""
    plain = jobs.debounced.using(on_conflict="dedupe")
    first, second = stage(
        live, "fast", [(jobs.debounced, {"doc": 83, "edit": 1}), (plain, {"doc": 83, "edit": 2})]
    )
    assert live.row(first).input == {"doc": 83, "edit": 1}
    assert live.row(second) is None
    assert inspect_job(second)["id"] == str(first)


@pytest.mark.parametrize("burst", ["one-transaction", "enqueue_many", "many-transactions"])
def test_jctl_08_a_staged_debounce_burst_runs_once_after_the_last(live, burst):
    """SPEC JCTL-07 through the outbox: every enqueue of the burst is staged; one job is left,
    with the last input, and it runs once."""
    edits = [{"doc": 84, "edit": i} for i in range(20)]
    if burst == "one-transaction":
        with transaction.atomic():
            results = [jobs.debounced.enqueue(**inputs) for inputs in edits]
    elif burst == "enqueue_many":
        with transaction.atomic():
            results = jobs.debounced.enqueue_many(edits)
    else:
        results = []
        for inputs in edits:
            with transaction.atomic():
                results.append(jobs.debounced.enqueue(**inputs))
    assert all(result.staged for result in results)
    [row] = live.driver.reads().list_jobs(name="tests.jobs.debounced")
    assert row.input == {"doc": 84, "edit": 19}
    assert {inspect_job(result.id)["id"] for result in results} == {str(row.id)}
    assert run_until_idle() == []  # due a window after the last enqueue
    live.advance(31)
    assert [e.outcome for e in run_until_idle()] == ["completed"]
    ran = Ledger.objects.filter(token="debounced:84").values_list("phase", flat=True)
    assert list(ran) == ["edit-19"]


@pytest.mark.django_db(transaction=True, databases=["default", "orders"])
def test_jctl_08_the_cross_database_publish_carries_expiry_and_replace():
    """Staged on the ``orders`` database, published to the jobs' own: claim, enqueue, mark."""
    holder = jobs.debounced.using(delay="1h", outbox=False).enqueue(doc=85, edit=1)
    settings = {**AUTO, "OUTBOX_DATABASES": ["default", "orders"]}
    with override_settings(XJOBS=settings), transaction.atomic(using="orders"):
        expiring = jobs.expiring.using(delay="1h").enqueue(token="x8-orders")
        replacing = jobs.debounced.enqueue(doc=85, edit=2)
    row = Job.objects.using("default").get(id=expiring.id)
    assert row.expires_at - row.run_at == timedelta(minutes=10)
    held = Job.objects.using("default").get(id=holder.id)
    assert held.input == {"doc": 85, "edit": 2}
    assert OutboxEntry.objects.using("orders").get(id=replacing.id).job_id == holder.id
    assert not Job.objects.using("default").filter(id=replacing.id).exists()


@pytest.mark.django_db(transaction=True)
def test_jctl_08_an_expiring_job_costs_the_outbox_no_statement_more():
    """The expiry rides in the same staging statement and the same one-statement publish: a
    transaction of expiring enqueues costs what one of plain enqueues does."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def statements(enqueue) -> tuple[int, int]:
        with CaptureQueriesContext(connection) as queries, transaction.atomic():
            for n in range(10):
                enqueue(n)
            staged = len(queries)
        return staged, len(queries) - staged

    with override_settings(XJOBS=AUTO):
        plain = statements(lambda n: jobs.ok.enqueue(n=n))
        expiring = statements(lambda n: jobs.expiring.enqueue(token=f"x8-count-{n}"))
    assert expiring == plain


def _nodes(node):
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.django_db
@pytest.mark.parametrize("replace", [False, True], ids=["plain", "replace"])
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_jctl_08_the_publish_at_commit_stays_linear_in_its_chunk(generic, replace):
    """The rows staged to replace are left out of the insert, and the answer says which rows
    went in: both as hashed subplans, never a rescan of the chunk for each of its rows (a
    nested loop there cost a million comparisons for a chunk of a thousand: the answer's join
    did under the generic plan a prepared statement settles on, the replace test under both)."""
    from django_xjobs.drivers.postgres.outbox import STATEMENTS, PostgresOutboxStore
    from django_xjobs.ids import uuid7_many
    from tests.support.plans import plan

    chunk = 1000
    store = PostgresOutboxStore("default")
    handle, key = (jobs.debounced, "doc") if replace else (jobs.ok, "n")
    ids = [store.stage(handle.build_request({key: n}), notify=False) for n in range(chunk)]
    params = {"ids": ids, "run_ids": uuid7_many(chunk), "lease": 30.0, "token": "t"}
    top = plan(STATEMENTS["publish_taken"], params, generic=generic, analyze=True)
    assert top["Actual Rows"] == chunk
    rescanned = sum(
        node["Actual Loops"] * (node["Actual Rows"] + node.get("Rows Removed by Filter", 0))
        + node.get("Rows Removed by Join Filter", 0)
        for node in _nodes(top)
        if node["Node Type"] in ("CTE Scan", "Nested Loop")
    )
    assert rescanned <= 10 * chunk, rescanned
