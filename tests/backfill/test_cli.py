"""Operating backfills (issue 15, part 4; SPEC §16): ``manage.py xjobs_backfill`` --list, the
--pending deploy gate, starting a pass and each refusal (``X_BACKFILL_UNKNOWN``,
``_ENVIRONMENT``, ``_MIGRATION_PENDING``, ``_APPLIED``, ``_RUNNING``), --wait's progress and exit
status, the ``X_BACKFILL_PENDING`` check, the ledger in the admin and ``inspect_job``'s
``backfill`` section (INSP-02).

The fixtures are tests/backfills.py: in the unnamed test environment four of them run
(``tests.production_only`` does not)."""

from __future__ import annotations

import json
import threading
import uuid
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test import override_settings

from django_xjobs import operations
from django_xjobs.backfills import get_backfill
from django_xjobs.backfills.gate import ENQUEUED_BY
from django_xjobs.backfills.watch import PassWatch, Progress, ProgressDisplay
from django_xjobs.drivers import get_driver
from django_xjobs.management.checks import check_pending_backfills
from django_xjobs.models import Backfill as LedgerRow
from django_xjobs.operations.backfills import backfill_section
from django_xjobs.testing import run_until_idle
from tests import backfills, jobs
from tests.models import Order, Token
from tests.support.process import MANAGE, ROOT, wait_for, worker_env

SETTINGS = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "off"}
RUN_HERE = ["tests.fill_big", "tests.fill_currency", "tests.forgets_rows", "tests.tokens"]


def orders(n: int) -> list[Order]:
    return Order.objects.bulk_create([Order() for _ in range(n)])


class Ran:
    """What one ``xjobs_backfill`` call printed, and the error line it ended with, if any."""

    def __init__(self, *args: str) -> None:
        self.stdout, self.stderr = StringIO(), StringIO()
        self.error: CommandError | None = None
        try:
            call_command("xjobs_backfill", *args, stdout=self.stdout, stderr=self.stderr)
        except CommandError as error:
            self.error = error

    @property
    def out(self) -> str:
        return self.stdout.getvalue()

    @property
    def err(self) -> str:
        return self.stderr.getvalue()

    def json(self):
        return json.loads(self.out)

    def ok(self) -> Ran:
        assert self.error is None, str(self.error)
        return self

    def refused(self, code: str) -> str:
        assert self.error is not None, self.out
        assert str(self.error).startswith(f"{code}: "), str(self.error)
        return str(self.error)


def backfill_cmd(*args: str) -> Ran:
    return Ran(*args)


def environment(name: str | None):
    return override_settings(XJOBS={**SETTINGS, "ENVIRONMENT": name})


def passes(name: str) -> list:
    return get_driver().backfills().history(name)


def jobs_named(name: str) -> list:
    return get_driver().reads().list_jobs(queue=None, name=name, state=None, limit=10)


# --- --list ---------------------------------------------------------------------------------------


def test_list_shows_every_declared_backfill_with_its_latest_pass(harness):
    orders(4)
    backfill_cmd("tests.fill_currency").ok()
    run_until_idle()
    text = backfill_cmd("--list").ok().out
    assert "tests.fill_currency  completed here" in text
    assert "latest pass: completed: 4 rows, 2 pages" in text
    assert "tests.tokens  pending" in text and "requires tests.0002_orders" in text
    assert "tests.production_only  not for this environment" in text
    listed = {b["name"]: b for b in backfill_cmd("--list", "--json").ok().json()}
    assert sorted(listed) == sorted([*RUN_HERE, "tests.production_only"])
    currency = listed["tests.fill_currency"]
    assert {k: currency[k] for k in ("batch", "rate", "environments", "requires", "queue")} == {
        "batch": 3,
        "rate": 1e6,
        "environments": None,
        "requires": None,
        "queue": "default",
    }
    assert (currency["runs_here"], currency["pending"]) == (True, False)
    latest = currency["latest"]
    assert (latest["status"], latest["rows"], latest["pages"], latest["cursor"]) == (
        "completed",
        4,
        2,
        None,
    )
    assert latest["completed_at"] is not None and latest["environment"] is None
    assert listed["tests.tokens"]["latest"] is None and listed["tests.tokens"]["pending"]
    production = listed["tests.production_only"]
    assert (production["environments"], production["runs_here"], production["pending"]) == (
        ["production"],
        False,
        False,
    )


# --- --pending: the deploy gate -------------------------------------------------------------------


def test_pending_exits_non_zero_until_every_backfill_here_completed(harness):
    gate = backfill_cmd("--pending")
    message = gate.refused("X_BACKFILL_PENDING")
    assert ", ".join(RUN_HERE) in message and "xjobs_backfill --all" in message
    assert [line.split()[0] for line in gate.out.splitlines()] == RUN_HERE
    as_json = backfill_cmd("--pending", "--json")
    as_json.refused("X_BACKFILL_PENDING")
    assert [b["name"] for b in as_json.json()] == RUN_HERE
    backfill_cmd("--all").ok()
    run_until_idle()
    assert backfill_cmd("--pending").ok().out.startswith("no backfill is pending")
    assert backfill_cmd("--pending", "--json").ok().json() == []


def test_pending_counts_passes_in_this_environment_only(harness):
    with environment("staging"):
        backfill_cmd("--all").ok()
        run_until_idle()
        assert backfill_cmd("--pending").error is None
    with environment("production"):
        gate = backfill_cmd("--pending", "--json")
        gate.refused("X_BACKFILL_PENDING")
        # staging's passes do not count here, and production_only runs here
        assert [b["name"] for b in gate.json()] == sorted([*RUN_HERE, "tests.production_only"])


def test_the_check_warns_while_a_backfill_is_pending(harness):
    assert check_pending_backfills(databases=None) == []  # needs --database
    [warning] = check_pending_backfills(databases=["default"])
    assert warning.id == "django_xjobs.W020"
    assert warning.msg.startswith("X_BACKFILL_PENDING") and ", ".join(RUN_HERE) in warning.msg
    assert "xjobs_backfill --all" in warning.hint
    backfill_cmd("--all").ok()
    run_until_idle()
    assert check_pending_backfills(databases=["default"]) == []


def test_manage_py_check_with_the_database_reports_w020(db):
    err = StringIO()
    call_command("check", "--database", "default", stderr=err, stdout=StringIO())
    assert "(django_xjobs.W020) X_BACKFILL_PENDING" in err.getvalue()


@pytest.mark.process
def test_the_gate_exits_1_with_one_line_in_a_real_process(transactional_db):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, str(MANAGE), "xjobs_backfill", "--pending", "--settings=tests.settings"],
        env=worker_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "X_BACKFILL_PENDING" in lines[0]
    assert "tests.fill_currency" in done.stdout


# --- NAME: starting a pass ------------------------------------------------------------------------


def test_name_enqueues_the_pass_and_prints_its_job(harness):
    ran = backfill_cmd("tests.fill_currency", "--json").ok()
    started = ran.json()
    assert started == {
        "backfill": "tests.fill_currency",
        "job": started["job"],
        "force": False,
        "live": False,
    }
    row = harness.row(uuid.UUID(started["job"]))
    assert (row.name, row.state, row.input, row.enqueued_by) == (
        "tests.fill_currency",
        "ready",
        {"force": False},
        ENQUEUED_BY,
    )
    text = backfill_cmd("tests.fill_big").ok().out
    [big] = jobs_named("tests.fill_big")
    assert text == f"tests.fill_big: queued its pass, job {big.id}\n"


def test_bf_05_a_completed_backfill_is_x_backfill_applied_until_force(harness):
    orders(4)
    backfill_cmd("tests.fill_currency").ok()
    run_until_idle()
    message = backfill_cmd("tests.fill_currency").refused("X_BACKFILL_APPLIED")
    assert "4 rows" in message and "xjobs_backfill tests.fill_currency --force" in message
    assert len(jobs_named("tests.fill_currency")) == 1  # refused before anything was queued
    orders(2)
    forced = backfill_cmd("tests.fill_currency", "--force", "--json").ok().json()
    assert forced["force"] is True
    assert harness.row(uuid.UUID(forced["job"])).input == {"force": True}
    run_until_idle()
    assert [(p.status, p.rows_processed) for p in passes("tests.fill_currency")] == [
        ("completed", 2),
        ("completed", 4),
    ]


def test_a_live_pass_is_x_backfill_running_naming_its_job(harness):
    live = backfills.fill_currency.enqueue().id
    for args in (("tests.fill_currency",), ("tests.fill_currency", "--force")):
        message = backfill_cmd(*args).refused("X_BACKFILL_RUNNING")
        assert f"job {live}" in message and f"xjobs cancel {live}" in message
    assert [j.id for j in jobs_named("tests.fill_currency")] == [live]


def test_an_unknown_name_is_x_backfill_unknown_listing_the_known_ones(harness):
    message = backfill_cmd("tests.nope").refused("X_BACKFILL_UNKNOWN")
    assert "'tests.nope'" in message and "tests.fill_currency, tests.forgets_rows" in message


def test_an_excluded_environment_is_refused_before_anything_is_queued(harness):
    message = backfill_cmd("tests.production_only").refused("X_BACKFILL_ENVIRONMENT")
    assert "runs in production; this is an unnamed environment" in message
    with environment("staging"):
        message = backfill_cmd("tests.production_only").refused("X_BACKFILL_ENVIRONMENT")
        assert "this is staging" in message
    assert jobs_named("tests.production_only") == []
    with environment("production"):
        backfill_cmd("tests.production_only").ok()
    assert len(jobs_named("tests.production_only")) == 1


def test_a_required_migration_not_applied_is_x_backfill_migration_pending(harness):
    applied = MigrationRecorder(connection).migration_qs
    applied.filter(app="tests", name="0002_orders").delete()  # undone with the test transaction
    message = backfill_cmd("tests.tokens").refused("X_BACKFILL_MIGRATION_PENDING")
    assert "tests.0002_orders" in message and "migrate tests --database default" in message
    backfill_cmd("--all").refused("X_BACKFILL_MIGRATION_PENDING")
    assert get_driver().reads().list_jobs(queue=None, name=None, state=None, limit=10) == []
    applied.create(app="tests", name="0002_orders")
    backfill_cmd("tests.tokens").ok()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--list", "--force"), "X_INVARIANT: --force goes with a backfill NAME"),
        (("--all", "--force"), "X_INVARIANT: --force goes with a backfill NAME"),
        (("--pending", "--wait"), "X_INVARIANT: --wait goes with a backfill NAME or --all"),
        (("--list", "tests.fill_currency"), "not allowed with"),
        (("--force",), "one of the arguments NAME --list --pending --all is required"),
    ],
)
def test_one_of_list_pending_name_or_all_and_what_goes_with_each(args, says):
    with pytest.raises(CommandError, match=says):
        call_command("xjobs_backfill", *args)


# --- --all ----------------------------------------------------------------------------------------


def test_all_enqueues_every_pending_backfill_in_name_order_and_joins_a_live_one(harness):
    live = backfills.fill_currency.enqueue().id
    with environment("production"):
        started = backfill_cmd("--all", "--json").ok().json()
    assert [s["backfill"] for s in started] == sorted([*RUN_HERE, "tests.production_only"])
    currency = started[RUN_HERE.index("tests.fill_currency")]
    assert (currency["job"], currency["live"]) == (str(live), True)
    text = backfill_cmd("--all").ok().out  # every one is live now: each is joined
    assert f"tests.fill_currency: its pass is already live, job {live}" in text
    run_until_idle()
    assert backfill_cmd("--all").ok().out.startswith("no backfill is pending")


# --- --wait ---------------------------------------------------------------------------------------


def drain_once_queued(names: list[str], deadline: float = 20.0) -> threading.Thread:
    """A worker on another thread: runs each named backfill's pass once the command queued it."""

    left = set(names)

    def drained() -> bool:
        for execution in run_until_idle():
            left.discard(execution.job.name)
        return not left

    def work() -> None:
        try:
            wait_for(drained, timeout=deadline, what=f"the passes of {', '.join(names)} to run")
        finally:
            connection.close()

    thread = threading.Thread(target=work, name="test-worker")
    thread.start()
    return thread


def test_wait_follows_the_pass_a_worker_runs_and_exits_0(live_harness):
    orders(7)
    worker = drain_once_queued(["tests.fill_currency"])
    try:
        ran = backfill_cmd("tests.fill_currency", "--wait").ok()
    finally:
        worker.join()
    [job] = jobs_named("tests.fill_currency")
    assert ran.out.splitlines() == [
        f"tests.fill_currency: queued its pass, job {job.id}",
        f"tests.fill_currency: completed, 7 rows in 3 pages (job {job.id})",
    ]
    # stderr is no terminal here: whole lines, the last one the pass's end
    assert ran.err.splitlines()[-1].startswith("tests.fill_currency done  7/7 rows (100%)  3 pages")
    assert "\r" not in ran.err


def test_wait_exits_non_zero_with_a_stalled_passs_error(live_harness):
    orders(5)
    worker = drain_once_queued(["tests.forgets_rows"])
    try:
        ran = backfill_cmd("tests.forgets_rows", "--wait", "--json")
    finally:
        worker.join()
    message = ran.refused("X_BACKFILL_STALLED")
    assert "5 row(s)" in message
    report = ran.json()
    assert (report["state"], report["rows"], report["pages"]) == ("dead", 5, 3)
    assert report["last_error"] == message


def test_all_wait_follows_each_pass_in_turn(live_harness):
    orders(4)
    Token.objects.bulk_create([Token(id=uuid.uuid4()) for _ in range(3)])
    worker = drain_once_queued(RUN_HERE)
    try:
        # fill_big runs first and fixes every order, so forgets_rows finds none left
        reports = backfill_cmd("--all", "--wait", "--json").ok().json()
    finally:
        worker.join()
    assert [(r["backfill"], r["state"], r["rows"]) for r in reports] == [
        ("tests.fill_big", "done", 4),
        ("tests.fill_currency", "done", 0),
        ("tests.forgets_rows", "done", 0),
        ("tests.tokens", "done", 3),
    ]


def test_wait_on_a_finished_pass_reports_its_end_at_once(harness):
    orders(7)
    job_id = backfills.fill_currency.enqueue().id
    run_until_idle()
    lines: list[str] = []
    job, last = PassWatch(get_backfill("tests.fill_currency"), job_id).run(
        ProgressDisplay(lines.append).show
    )
    assert (job.state, last.rows, last.pages, last.total) == ("done", 7, 3, 7)
    assert lines == ["tests.fill_currency done  7/7 rows (100%)  3 pages\n"]
    orders(3)
    stalled = backfills.forgets_rows.enqueue().id
    run_until_idle()
    job, last = PassWatch(get_backfill("tests.forgets_rows"), stalled).run(lambda p: None)
    assert job.state == "dead" and job.last_error.startswith("X_BACKFILL_STALLED")
    assert (last.rows, last.pages, last.total) == (3, 2, None)


def test_the_rate_and_eta_come_from_the_ledger_and_an_injected_clock(harness):
    """The total is rows done plus one ``remaining()`` count, refreshed every
    ``estimate_interval``; the rate is rows a second since the watch began."""
    orders(10)
    job_id = backfills.fill_currency.enqueue().id
    run_id = harness.row(job_id).run_id
    ledger = harness.driver.backfills()
    now = [100.0]
    watch = PassWatch(
        get_backfill("tests.fill_currency"), job_id, estimate_interval=60, clock=lambda: now[0]
    )
    _, first = watch.poll()
    assert (first.state, first.rows, first.total, first.rate, first.eta) == (
        "ready",
        0,
        10,
        None,
        None,
    )
    ledger.start(
        run_id=run_id,
        job_id=job_id,
        name="tests.fill_currency",
        checksum="c",
        app_version="test",
        environment=None,
    )
    ledger.progress(run_id, cursor="4", rows=4, pages=2)
    now[0] = 102.0
    _, second = watch.poll()
    assert (second.rows, second.total, second.rate, second.eta) == (4, 10, 2.0, 3.0)
    assert second.line() == (
        "tests.fill_currency ready  4/10 rows (40%)  2 pages  "
        "waiting for a worker on queue default  2 rows/s  ETA 3.0s"
    )
    Order.objects.filter(pk__in=[o.pk for o in Order.objects.all()[:4]]).update(currency="EUR")
    orders(5)  # the table grew: seen at the next count, not before
    now[0] = 150.0
    assert watch.poll()[1].total == 10
    now[0] = 161.0
    assert watch.poll()[1].total == 4 + 11


def test_a_terminal_redraws_one_line_and_a_log_gets_lines_at_intervals():
    def look(rows: int, state: str = "running") -> Progress:
        return Progress("b", uuid.uuid4(), "default", state, rows, rows // 2, 100, None)

    written: list[str] = []
    tty = ProgressDisplay(written.append, tty=True)
    tty.show(look(40))
    tty.show(look(6))
    tty.show(look(100, "done"))
    assert written == [
        "\rb running  40/100 rows (40%)  20 pages",
        "\rb running  6/100 rows (6%)  3 pages   ",  # padded over the longer line before
        "\rb done  100/100 rows (100%)  50 pages\n",
    ]
    written.clear()
    now = [0.0]
    log = ProgressDisplay(written.append, clock=lambda: now[0])
    log.show(look(10))
    now[0] = 5.0
    log.show(look(20))  # too soon for another line
    now[0] = 10.0
    log.show(look(30))
    log.show(look(100, "done"))  # the end is always written
    assert [w.split("  ")[1] for w in written] == [
        "10/100 rows (10%)",
        "30/100 rows (30%)",
        "100/100 rows (100%)",
    ]


# --- inspect_job (SPEC INSP-02) -------------------------------------------------------------------


def test_insp_02_a_pass_carries_its_ledger_row_and_any_other_job_none(harness):
    ordinary = jobs.ok.enqueue(n=1).id
    assert operations.inspect_job(ordinary)["backfill"] is None
    orders(4)
    job_id = backfills.fill_currency.enqueue().id
    assert operations.inspect_job(job_id)["backfill"] == {
        "name": "tests.fill_currency",
        "status": None,  # queued, not started: no ledger row yet
        "environment": None,
        "rows": 0,
        "pages": 0,
        "cursor": None,
        "started_at": None,
        "completed_at": None,
        "error": None,
    }
    run_until_idle()
    [row] = passes("tests.fill_currency")
    section = operations.inspect_job(job_id)["backfill"]
    assert section == {
        "name": "tests.fill_currency",
        "status": "completed",
        "environment": None,
        "rows": 4,
        "pages": 2,
        "cursor": None,
        "started_at": row.started_at.isoformat(),
        "completed_at": row.completed_at.isoformat(),
        "error": None,
    }
    shown = StringIO()
    call_command("xjobs", "show", str(job_id), stdout=shown)
    assert (
        "backfill   tests.fill_currency  completed: 4 rows, 2 pages, cursor -" in shown.getvalue()
    )


def test_insp_02_a_stalled_pass_shows_its_error_and_cursor(harness):
    orders(3)
    job_id = backfills.forgets_rows.enqueue().id
    run_until_idle()
    section = operations.inspect_job(job_id)["backfill"]
    assert section["status"] == "failed" and section["error"].startswith("X_BACKFILL_STALLED")
    assert section["cursor"] == str(Order.objects.order_by("pk").last().pk)


def test_insp_02_a_pass_of_a_backfill_no_longer_declared_is_read_from_the_ledger(harness):
    run_id = uuid.uuid4()
    harness.driver.backfills().start(
        run_id=run_id,
        job_id=uuid.uuid4(),
        name="tests.renamed",
        checksum="c",
        app_version="an earlier release",
        environment="production",
    )
    section = backfill_section("tests.renamed", run_id)
    assert (section["name"], section["status"], section["environment"]) == (
        "tests.renamed",
        "running",
        "production",
    )
    assert backfill_section("tests.renamed", uuid.uuid4()) is None


# --- the admin ------------------------------------------------------------------------------------


@pytest.fixture
def admin_client(client, db):
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


def completed_then_running(checksum: str) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    """A completed pass of four rows, then a forced pass three rows into five more, recorded
    under ``checksum``: the first pass's job id, the running pass's job id and its run id."""
    orders(4)
    first = backfills.fill_currency.enqueue().id
    run_until_idle()
    orders(5)
    running = backfills.fill_currency.enqueue(force=True).id
    run_id = get_driver().reads().get_job(running).run_id
    ledger = get_driver().backfills()
    ledger.start(
        run_id=run_id,
        job_id=running,
        name="tests.fill_currency",
        checksum=checksum,
        app_version="test",
        environment=None,
    )
    ledger.progress(run_id, cursor="6", rows=3, pages=1)
    return first, running, run_id


def test_the_admin_lists_passes_with_their_progress_and_job(admin_client):
    first, running, _ = completed_then_running(get_backfill("tests.fill_currency").checksum)
    page = admin_client.get("/admin/django_xjobs/backfill/")
    assert page.status_code == 200
    listed = page.context["cl"].result_list
    assert [(p.status, p.rows_processed) for p in listed] == [("running", 3), ("completed", 4)]
    text = page.content.decode()
    assert "rows/s for" in text and "done in" in text
    assert f'href="/admin/django_xjobs/job/{first}/change/"' in text
    assert f'href="/admin/django_xjobs/job/{running}/change/"' in text
    done = admin_client.get("/admin/django_xjobs/backfill/?status__exact=completed")
    assert [p.job_id for p in done.context["cl"].result_list] == [first]
    assert (
        'href="/admin/django_xjobs/backfill/">Backfills<'
        in admin_client.get("/admin/django_xjobs/job/").content.decode()
    )


def test_a_pass_page_has_the_estimate_and_its_names_history(admin_client):
    first, _, run_id = completed_then_running("changed")
    page = admin_client.get(f"/admin/django_xjobs/backfill/{run_id}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    # three rows done, five still matching (nothing was fixed): about eight in all
    assert "3 of about 8 rows" in text
    assert "batch 3, rate 1e+06 pages/s" in text and "changed since this pass" in text
    [earlier] = LedgerRow.objects.filter(job_id=first)
    assert "this pass" in text
    assert f'href="/admin/django_xjobs/backfill/{earlier.run_id}/change/"' in text
    assert 'name="_save"' not in text  # view-only
    assert admin_client.post(f"/admin/django_xjobs/backfill/{run_id}/change/").status_code == 403
    assert admin_client.get("/admin/django_xjobs/backfill/add/").status_code == 403
    assert LedgerRow.objects.get(run_id=run_id).rows_processed == 3
