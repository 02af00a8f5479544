"""Job controls (issue 29): expiry, snooze, progress, replace and debounce, each on the memory
and the PostgreSQL driver through the contract harness."""

from __future__ import annotations

import json
import math
import uuid
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from django_xjobs import conf, inspect_job, retry_job
from django_xjobs.drivers.contract import Complete, EnqueueRequest, RetryAt
from django_xjobs.errors import InvariantError
from django_xjobs.run.controls import RunControls, progress_text
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.models import Ledger

VIS = 30.0


def _xjobs(**changes):
    from django.conf import settings

    return override_settings(XJOBS={**settings.XJOBS, **changes})


def request(key="k", *, expires_in=None, expires_at=None, replace=False, n=1, delay=None):
    payload = {"n": n}
    return EnqueueRequest(
        name="tests.jobs.ok",
        queue="default",
        input=payload,
        input_json=json.dumps(payload),
        idempotency_key=key,
        max_attempts=3,
        delay=delay,
        expires_in=expires_in,
        expires_at=expires_at,
        replace=replace,
    )


def claim(driver, limit=10):
    return driver.runs().claim(
        queues=["default"], limit=limit, visibility_timeout=VIS, worker_id="w1"
    )


#: the ledger tokens these tests write; a process test elsewhere may leave rows of its own
OURS = ("stale", "given-at", "fresh", "later", "retried", "worker-stale", "worker-fresh")


def tokens(phase=None):
    rows = Ledger.objects.filter(token__in=OURS)
    rows = rows if phase is None else rows.filter(phase=phase)
    return sorted(rows.values_list("token", flat=True))


# --- expiry ------------------------------------------------------------------------------------


def test_jctl_01_an_expired_job_never_runs_and_ends_dead_as_expired(harness):
    """SPEC JCTL-01: the ledger proves it — a job claimed after its expiry writes nothing."""
    stale = jobs.expiring.enqueue(token="stale")
    past = jobs.expiring.using(expires_at=timezone.now() + timedelta(seconds=5))
    also_stale = past.enqueue(token="given-at")
    harness.advance(601)  # past both expiries
    fresh = jobs.expiring.enqueue(token="fresh")
    executions = run_until_idle()
    assert tokens() == ["fresh"]
    assert {e.job.id: e.outcome for e in executions}[stale.id] == "dead_lettered"
    for job_id in (stale.id, also_stale.id):
        row = harness.row(job_id)
        assert (row.state, row.stop_reason) == ("dead", "expired")
        assert row.last_error.startswith("X_JOB_EXPIRED")
        assert [a.outcome for a in row.errors] == ["dead"]
    assert harness.row(fresh.id).state == "done"


def test_jctl_01_the_expiry_counts_from_when_the_job_falls_due(harness):
    result = jobs.expiring.using(delay="1h").enqueue(token="later")
    row = harness.row(result.id)
    assert row.expires_at - row.run_at == timedelta(minutes=10)
    harness.advance(3600 + 60)  # due, and well inside its window
    run_until_idle()
    assert tokens() == ["later"]


def test_jctl_02_the_claim_marks_only_a_first_claim_past_the_expiry(harness):
    driver = harness.driver
    driver.jobs().enqueue(request("started", expires_in=60))
    [held] = claim(driver)
    assert not held.expired
    assert driver.runs().retry(RetryAt(held.id, held.lease_token))
    unstarted = driver.jobs().enqueue(request("unstarted", expires_in=60))
    none = driver.jobs().enqueue(request("no-expiry"))
    harness.advance(120)
    claimed = {c.id: c.expired for c in claim(driver)}
    # a retry of a started job runs whatever its expiry; a job without one never expires
    assert claimed == {held.id: False, unstarted.id: True, none.id: False}


def test_jctl_02_a_job_first_claimed_past_its_expiry_stays_expired_at_a_reclaim(harness):
    """A worker that claimed an expired job died before settling it: the row was stamped
    started by that claim, yet no handler ran, so the next claim finds it expired again."""
    driver = harness.driver
    stale = driver.jobs().enqueue(request("stale-reclaim", expires_in=60))
    harness.advance(120)
    assert [(c.id, c.expired) for c in claim(driver)] == [(stale.id, True)]
    harness.advance(VIS + 1)  # its lease lapses unsettled
    assert [(c.id, c.expired) for c in claim(driver)] == [(stale.id, True)]


def test_jctl_02_an_operators_retry_runs_an_expired_job(harness):
    stale = jobs.expiring.enqueue(token="retried")
    harness.advance(601)
    run_until_idle()
    assert tokens() == []
    retry_job(stale.id)
    assert harness.row(stale.id).expires_at is None
    run_until_idle()
    assert tokens() == ["retried"]


def test_jctl_08_expiry_and_replace_are_staged_inside_atomic_and_kept(live_harness):
    """SPEC JCTL-08: inside atomic() an expiring, a debounced and a replacing enqueue are
    staged like any other, and published with their expiry and replace."""
    with _xjobs(OUTBOX="auto"):
        holder = jobs.ok.using(delay="1h").enqueue(n=1)  # outside atomic(): published directly
        with transaction.atomic():
            expiring = jobs.expiring.enqueue(token="t")
            debounced = jobs.debounced.enqueue(doc=1)
            replacing = jobs.ok.using(on_conflict="replace").enqueue(n=1)
            direct = jobs.expiring.using(outbox=False).enqueue(token="direct")
        assert [r.staged for r in (expiring, debounced, replacing, direct)] == [True] * 3 + [False]
        row = live_harness.row(expiring.id)
        assert row.expires_at - row.run_at == timedelta(minutes=10)
        assert live_harness.row(debounced.id).state == "delayed"  # a quiet window away
        assert live_harness.row(holder.id).state == "ready"  # its run time came forward to now
        assert inspect_job(replacing.id)["id"] == str(holder.id)


def test_jctl_01_bad_expiries_are_refused_at_declaration_and_using():
    with pytest.raises(InvariantError, match="expires_at"):
        jobs.ok.using(expires_at=timezone.now().replace(tzinfo=None))
    from django_xjobs import job
    from django_xjobs.errors import XJobsError

    with pytest.raises(XJobsError, match="expires_in"):

        @job(idempotency_key="x", name="tests.bad_expiry", expires_in=0)
        def bad(ctx):
            pass


# --- snooze --------------------------------------------------------------------------------------


def test_jctl_03_a_snooze_spends_no_attempt_and_is_recorded(harness):
    """SPEC JCTL-03: the attempt count is unchanged by a snooze; the history records it."""
    result = jobs.snoozer.enqueue(token="s")
    [first] = run_until_idle()
    assert first.outcome == "suspended"
    row = harness.row(result.id)
    assert (row.state, row.attempt, row.snoozes) == ("ready", 0, 1)
    assert inspect_job(result.id)["state"] == "delayed"
    assert [a.outcome for a in row.errors] == ["snoozed"]
    assert row.errors[0].message == "snoozed for 30s"
    assert row.run_at - row.updated_at == timedelta(seconds=30)
    assert run_until_idle() == []  # not due yet
    harness.advance(31)
    [second] = run_until_idle()
    row = harness.row(result.id)
    assert (second.outcome, row.state, row.attempt) == ("completed", "done", 1)
    assert row.result == 1  # the completing run was attempt 1: the snooze spent none


def test_jctl_04_a_snooze_past_the_bound_fails_with_a_code(harness):
    with _xjobs(MAX_SNOOZES=2):
        result = jobs.snoozer.enqueue(token="bound", times=5, seconds=1)
        for _ in range(2):
            run_until_idle()
            harness.advance(2)
        run_until_idle()
    row = harness.row(result.id)
    assert row.snoozes == 2
    assert (row.state, row.stop_reason) == ("dead", "terminal")
    assert row.last_error.startswith("X_JOB_SNOOZE_LIMIT")


def test_jctl_03_an_async_body_snoozes_and_reports_progress(harness):
    result = jobs.async_snoozer.enqueue(n=1)
    [run] = run_until_idle()
    row = harness.row(result.id)
    assert (run.outcome, row.state, row.attempt, row.snoozes) == ("suspended", "ready", 0, 1)
    assert (row.progress["done"], row.progress["total"], row.progress["note"]) == (1, 2, "half")


def test_jctl_03_a_hand_built_ctx_cannot_snooze():
    from django_xjobs.run.context import JobContext
    from django_xjobs.run.stop import StopSignal

    ctx = JobContext(
        job_id=uuid.uuid4(),
        run_id=uuid.uuid4(),
        name="x",
        queue="default",
        attempt=1,
        max_attempts=1,
        inputs={},
        tenant_id=None,
        enqueued_by=None,
        signal=StopSignal(),
        logger=None,  # type: ignore[arg-type]
        step=None,  # type: ignore[arg-type]
    )
    with pytest.raises(InvariantError, match="built by hand"):
        ctx.snooze("1s")


# --- progress ------------------------------------------------------------------------------------


def test_jctl_05_progress_is_stored_fenced_on_the_lease(harness):
    driver = harness.driver
    driver.jobs().enqueue(request("p"))
    [held] = claim(driver)
    assert driver.runs().progress(held.id, held.lease_token, {"done": 3, "total": 10, "note": "x"})
    stored = harness.row(held.id).progress
    assert {k: stored[k] for k in ("done", "total", "note")} == {
        "done": 3,
        "total": 10,
        "note": "x",
    }
    assert "at" in stored
    assert not driver.runs().progress(held.id, uuid.uuid4(), {"done": 4, "total": 10, "note": ""})
    assert driver.runs().complete([Complete(held.id, held.lease_token)]) == {held.id}
    assert not driver.runs().progress(
        held.id, held.lease_token, {"done": 5, "total": 10, "note": ""}
    )
    assert harness.row(held.id).progress["done"] == 3


def test_jctl_05_a_tight_loop_writes_progress_a_few_times_and_the_last_value(harness, monkeypatch):
    writes = []
    store = harness.driver.runs().progress

    def counted(job_id, token, value):
        writes.append(value["done"])
        return store(job_id, token, value)

    monkeypatch.setattr(harness.driver, "progress", counted)
    result = jobs.reports_progress.enqueue(token="loop", items=20_000)
    [run] = run_until_idle()
    assert run.outcome == "completed"
    assert 1 <= len(writes) <= 4, writes  # one a second, plus the last: not 20,000
    assert writes[-1] == 20_000
    trace = inspect_job(result.id)
    assert (trace["progress"]["done"], trace["progress"]["total"]) == (20_000, 20_000)
    assert progress_text(trace["progress"]) == "20000/20000 (100%) copying"


def test_jctl_05_progress_values_are_checked():
    controls = RunControls(
        job_id=uuid.uuid4(), lease_token=uuid.uuid4(), snoozes=0, write=lambda *a: True
    )
    for done, total, note in ((-1, None, ""), (math.nan, None, ""), (1, 0, ""), (1, 2, 3)):
        with pytest.raises(InvariantError):
            controls.progress(done, total, note)
    controls.progress(1, None, "x" * 1000)
    assert controls.writes == 1


# --- replace and debounce ------------------------------------------------------------------------


def test_jctl_06_replace_updates_the_waiting_holder(harness):
    driver = harness.driver
    first = driver.jobs().enqueue(request("r", n=1, delay=60))
    again = driver.jobs().enqueue(request("r", n=2, replace=True))
    assert (again.id, again.deduped, again.replaced) == (first.id, True, True)
    row = harness.row(first.id)
    assert (row.input, row.state) == ({"n": 2}, "ready")
    assert len(driver.reads().list_jobs()) == 1


def test_jctl_06_a_started_holder_is_never_touched(harness):
    driver = harness.driver
    first = driver.jobs().enqueue(request("r", n=1))
    [held] = claim(driver)
    running = driver.jobs().enqueue(request("r", n=2, replace=True))
    assert (running.id, running.deduped, running.replaced) == (first.id, True, False)
    assert harness.row(first.id).input == {"n": 1}
    assert driver.runs().retry(RetryAt(held.id, held.lease_token, delay=60))  # waiting, but started
    retrying = driver.jobs().enqueue(request("r", n=3, replace=True))
    assert (retrying.deduped, retrying.replaced) == (True, False)
    assert harness.row(first.id).input == {"n": 1}


def test_jctl_06_replace_through_the_handle(harness):
    first = jobs.ok.using(delay="1h").enqueue(n=1)
    again = jobs.ok.using(on_conflict="replace").enqueue(n=1)
    assert (again.id, again.replaced) == (first.id, True)
    assert harness.row(first.id).state == "ready"  # its run time came forward to now


def test_jctl_07_a_debounced_burst_of_100_runs_once_after_the_last(harness):
    """SPEC JCTL-07: 100 enqueues in a burst leave one waiting job with the last input, due a
    window after the last enqueue; it runs once."""
    results = [jobs.debounced.enqueue(doc=7, edit=i) for i in range(100)]
    assert len({r.id for r in results}) == 1
    assert [r.replaced for r in results] == [False] + [True] * 99
    row = harness.row(results[0].id)
    assert row.input == {"doc": 7, "edit": 99}
    assert row.run_at - row.updated_at == timedelta(seconds=30)
    assert run_until_idle() == []
    harness.advance(31)
    assert [e.outcome for e in run_until_idle()] == ["completed"]
    ran = Ledger.objects.filter(token="debounced:7").values_list("phase", flat=True)
    assert list(ran) == ["edit-99"]


def test_jctl_07_debounce_through_enqueue_many(harness):
    results = jobs.debounced.enqueue_many([{"doc": 8, "edit": i} for i in range(5)])
    assert len({r.id for r in results}) == 1
    assert harness.row(results[0].id).input == {"doc": 8, "edit": 4}


# --- the operator surfaces -----------------------------------------------------------------------


def _xjobs_command(*args: str) -> str:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


def _with_progress(token="shown"):
    """A job whose run reported progress and then snoozed: progress, a snooze and a waiting row."""
    result = jobs.async_snoozer.enqueue(n=hash(token) % 1000)
    run_until_idle()
    return result.id


def test_jctl_05_xjobs_show_and_ls_print_progress_and_the_controls(db):
    job_id = _with_progress()
    expiring = jobs.expiring.enqueue(token="cli").id
    shown = _xjobs_command("show", str(job_id))
    assert "progress   1/2 (50%) half" in shown and "snoozes    1" in shown
    assert "expires" in _xjobs_command("show", str(expiring))
    assert json.loads(_xjobs_command("show", str(job_id), "--json"))["progress"]["done"] == 1
    listed = _xjobs_command("ls")
    [line] = [line for line in listed.splitlines() if str(job_id) in line]
    assert line.endswith("1/2 (50%) half")
    rows = json.loads(_xjobs_command("ls", "--json"))
    assert {r["id"]: r["progress"] and r["progress"]["note"] for r in rows}[str(job_id)] == "half"


@pytest.fixture
def admin_client(client, db):
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


def test_jctl_05_the_admin_shows_a_progress_bar_and_filters_expired_jobs(admin_client):
    job_id = _with_progress()
    listed = admin_client.get("/admin/django_xjobs/job/").content.decode()
    # the list's compact cell (issue 30): a short bar and "1/2", the whole text on hover
    assert '<progress value="50" max="100"' in listed and "1/2 (50%) half" in listed
    page = admin_client.get(f"/admin/django_xjobs/job/{job_id}/change/").content.decode()
    assert '<progress class="xjobs-progress" value="50"' in page and "1/2 (50%) half" in page
    # an hour back: inside the test's transaction the database's now() is its start
    gone = timezone.now() - timedelta(hours=1)
    stale = jobs.expiring.using(expires_at=gone).enqueue(token="x")
    run_until_idle()
    expired = admin_client.get("/admin/django_xjobs/job/?stop_reason__exact=expired")
    assert [j.id for j in expired.context["cl"].result_list] == [stale.id]
    assert "?stop_reason__exact=expired" in expired.content.decode()  # offered as a filter


def test_jctl_01_03_a_worker_counts_expiries_and_snoozes_apart_from_failures(live_harness):
    """SPEC JCTL-01, JCTL-03: through a real worker's settle, on both drivers: the expired job
    writes no ledger row and is counted as expired; the snooze is counted, not as a failure."""
    from django_xjobs import metrics
    from django_xjobs.worker.worker import Worker

    def counts():
        return (
            metrics.value("xjobs_jobs_expired_total", queue="default"),
            metrics.value("xjobs_jobs_snoozed_total", queue="default"),
            metrics.value("xjobs_jobs_total", queue="default", outcome="failed"),
            metrics.value("xjobs_jobs_total", queue="default", outcome="dead"),
        )

    before = counts()
    gone = timezone.now() - timedelta(hours=1)
    stale = jobs.expiring.using(expires_at=gone).enqueue(token="worker-stale")
    jobs.expiring.enqueue(token="worker-fresh")
    snoozing = jobs.snoozer.enqueue(token="worker-snooze")
    Worker(queues=["default"], driver=live_harness.driver, burst=True).run()
    after = counts()
    assert tuple(a - b for a, b in zip(after, before, strict=True)) == (1, 1, 0, 1)
    assert tokens("run") == ["worker-fresh"]
    assert live_harness.row(stale.id).stop_reason == "expired"
    assert live_harness.row(snoozing.id).attempt == 0


def test_jctl_04_max_snoozes_is_checked_like_every_count():
    from django_xjobs.errors import ConfigInvalidError

    for bad in (0, -1, "3", True):
        with _xjobs(MAX_SNOOZES=bad), pytest.raises(ConfigInvalidError, match="MAX_SNOOZES"):
            conf.get()


@pytest.mark.django_db
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_jctl_06_a_replace_finds_its_holder_by_the_live_key_index(generic):
    """A debounced enqueue runs this statement nearly every time: it must look the key up in
    the live-key index, not read the table, whatever the statistics say."""
    from django.db import connection

    from django_xjobs.drivers.postgres import STATEMENTS
    from tests.drivers.postgres.test_fence_plan import FILL, _reads
    from tests.support.plans import plan

    with connection.cursor() as cursor:  # analyzed full, truncated, refilled (test_fence_plan)
        cursor.execute(FILL)
        cursor.execute("ANALYZE x_jobs")
        cursor.execute("TRUNCATE x_jobs CASCADE")
        cursor.execute(FILL)
    params = {
        "name": "tests.jobs.ok",
        "tenant_id": None,
        "idempotency_key": "k7",
        "input": "{}",
        "run_at": None,
        "delay": 30.0,
        "expires_at": None,
        "expires_in": None,
    }
    reads = _reads(plan(STATEMENTS["replace_waiting"], params, generic=generic), "x_jobs")
    assert reads == ["x_jobs_name_tenant_idempotency_live_idx"], reads


@pytest.mark.parametrize(
    "given",
    [(60, 60, 60), (60, 120, None)],
    ids=["one-job-batch", "mixed-batch"],
)
def test_jctl_01_enqueue_many_carries_each_expiry(harness, given):
    """Both multi-row statements: a batch whose rows share every per-call column (one job's
    enqueue_many), and a mixed one (a relay's)."""
    requests = [request(key, expires_in=e) for key, e in zip("abc", given, strict=True)]
    rows = [harness.row(r.id) for r in harness.driver.jobs().enqueue_many(requests)]
    windows = [None if r.expires_at is None else (r.expires_at - r.run_at).seconds for r in rows]
    assert windows == list(given)


def _scrub_cards(text: str) -> str:
    """An ``XJOBS["REDACT"]`` hook: card-like tokens no input key names."""
    import re

    return re.sub(r"CARD-\d{4}", "[card]", text)


def test_jctl_09_a_progress_note_is_redacted_before_it_is_stored_or_shown(db, client):
    """Issue 40 (Medium): a note kept the run's secret input and a card number in the row,
    ``inspect_job``, ``xjobs show``/``ls`` and the admin, to a user with only ``view_job``,
    while the same run's error text was redacted. It passes ``redact`` (the run's secrets, then
    ``XJOBS["REDACT"]``) and then ``storable`` like every text a handler writes."""
    from django.contrib.auth.models import Permission, User

    hook = {"REDACT": "tests.run.test_controls._scrub_cards", "OUTBOX": "off"}
    with override_settings(XJOBS=hook):
        result = jobs.noted.enqueue(
            note="charging CARD-4242 for pw-SECRET-7731", password="pw-SECRET-7731"
        )
        run_until_idle()
        note = inspect_job(result.id)["progress"]["note"]
        assert note == "charging [card] for [redacted]"
        shown = _xjobs_command("show", str(result.id)) + _xjobs_command("ls", "--json")
        viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
        viewer.user_permissions.set(
            Permission.objects.filter(content_type__app_label="django_xjobs", codename="view_job")
        )
        client.force_login(viewer)
        shown += client.get("/admin/django_xjobs/job/").content.decode()
        page = client.get(f"/admin/django_xjobs/job/{result.id}/change/")
        assert page.status_code == 200
        shown += page.content.decode()
    assert "[card]" in shown and "[redacted]" in shown
    assert "4242" not in shown and "SECRET-7731" not in shown


def test_jctl_09_a_secret_at_the_notes_cut_leaves_no_prefix_behind():
    controls = RunControls(
        job_id=uuid.uuid4(),
        lease_token=uuid.uuid4(),
        snoozes=0,
        write=lambda *args: True,
        secrets=frozenset({"tok-" + "s" * 40}),
    )
    written = []
    controls._write = lambda job_id, token, value: written.append(value) or True
    controls.progress(1, None, "x" * 180 + "tok-" + "s" * 40)
    assert written[0]["note"] == "x" * 180 + "[redacted]"
