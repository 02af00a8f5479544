"""Metrics (SPEC §12 MET-01..03): the scrape view, the collector's throttle, the worker's
counters, ``xjobs_worker --metrics-port``, and the admin, CLI and metrics agreeing."""

from __future__ import annotations

import importlib
import json
import logging
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import RequestFactory, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from django_xjobs import metrics, views
from django_xjobs.drivers import get_driver
from django_xjobs.drivers.postgres import PostgresDriver
from django_xjobs.models import Job, SchedulerLeader
from django_xjobs.testing import run_until_idle
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.support.database import free_port
from tests.support.process import WorkerProcess, wait_for

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(autouse=True)
def fresh_reads() -> Iterator[None]:
    """Each test reads the database afresh: the 15 s throttle is per process."""
    metrics.clear_cache()
    yield
    metrics.clear_cache()


@pytest.fixture
def admin_client(client, db):
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


def parse(text: str) -> Series:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape() -> tuple[str, Series]:
    response = views.metrics_view(RequestFactory().get("/metrics/"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    text = response.content.decode()
    return text, parse(text)


def sample(series: Series, name: str, **labels: str) -> float | None:
    return series.get((name, frozenset(labels.items())))


def known_rows() -> None:
    """default: 1 done, 2 dead, 1 suspended, 2 ready, 1 delayed; other: 1 running, 1 ready."""
    jobs.ok.enqueue(n=1)
    jobs.terminal.enqueue(n=1)
    jobs.terminal.enqueue(n=2)
    jobs.sleeper.enqueue(n=1)  # parks in its three-day sleep
    run_until_idle()
    jobs.ok.enqueue(n=2)
    jobs.ok.enqueue(n=3)
    jobs.ok.using(delay="1h").enqueue(n=4)
    jobs.on_other_queue.enqueue(n=1)
    jobs.on_other_queue.enqueue(n=2)
    get_driver().runs().claim(queues=["other"], limit=1, visibility_timeout=60, worker_id="held")


# --- the view -----------------------------------------------------------------------------------


def test_the_view_shows_every_series_for_known_rows(db):
    known_rows()
    SchedulerLeader.objects.create(
        lock_key="scheduler", holder="sched-a", expires_at=timezone.now() + timedelta(minutes=5)
    )
    with override_settings(XJOBS={"QUEUES": ["other"], "OUTBOX": "auto"}):
        assert jobs.ok.enqueue(n=5).staged  # staged in this (test) transaction, unpublished
    metrics.inc("xjobs_job_leases_lost_total", queue="metrics-view")
    text, series = scrape()

    expected = {
        ("xjobs_queue_depth", "default"): 2,
        ("xjobs_queue_depth", "other"): 1,
        ("xjobs_queue_dead_jobs", "default"): 2,
        ("xjobs_queue_dead_jobs", "other"): 0,
        ("xjobs_queue_delayed_jobs", "default"): 1,
        ("xjobs_queue_running_jobs", "other"): 1,
        ("xjobs_queue_running_jobs", "default"): 0,
        ("xjobs_queue_suspended_jobs", "default"): 1,
    }
    for (name, queue), count in expected.items():
        assert sample(series, name, queue=queue) == count, (name, queue)
    # now() is the test transaction's start, so the rows enqueued in it are 0 s old
    assert sample(series, "xjobs_queue_oldest_ready_seconds", queue="default") is not None
    assert sample(series, "xjobs_outbox_pending") == 1
    assert sample(series, "xjobs_outbox_oldest_pending_seconds") is not None
    assert sample(series, "xjobs_scheduler_leader", holder="sched-a") == 1
    assert sample(series, "xjobs_job_leases_lost_total", queue="metrics-view") >= 1
    kinds = {family.name: family.type for family in text_string_to_metric_families(text)}
    assert kinds["xjobs_jobs"] == kinds["xjobs_job_leases_lost"] == "counter"
    assert kinds["xjobs_queue_depth"] == kinds["xjobs_scheduler_leader"] == "gauge"


def test_a_backfill_pass_exports_its_rows_and_pages(db):
    """Issue 15: the pass's counters reach the scrape, labelled by backfill."""
    from tests import backfills
    from tests.models import Order

    name = "tests.fill_currency"
    before = {
        series: metrics.value(series, backfill=name)
        for series in ("xjobs_backfill_rows_total", "xjobs_backfill_pages_total")
    }
    Order.objects.bulk_create([Order() for _ in range(4)])
    backfills.fill_currency.enqueue()
    run_until_idle()
    text, series = scrape()
    assert (
        sample(series, "xjobs_backfill_rows_total", backfill=name)
        == before["xjobs_backfill_rows_total"] + 4
    )
    assert (
        sample(series, "xjobs_backfill_pages_total", backfill=name)
        == before["xjobs_backfill_pages_total"] + 2
    )  # 3 rows, then 1: the empty page that would end it is never read
    kinds = {family.name: family.type for family in text_string_to_metric_families(text)}
    assert kinds["xjobs_backfill_rows"] == kinds["xjobs_backfill_pages"] == "counter"


def test_an_expired_leader_is_no_leader(db):
    SchedulerLeader.objects.create(
        lock_key="scheduler", holder="gone", expires_at=timezone.now() - timedelta(seconds=1)
    )
    text, series = scrape()
    assert "# TYPE xjobs_scheduler_leader gauge" in text
    assert not [key for key in series if key[0] == "xjobs_scheduler_leader"]


def test_the_view_answers_openmetrics_when_asked(db):
    request = RequestFactory().get("/metrics/", HTTP_ACCEPT="application/openmetrics-text")
    response = views.metrics_view(request)
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().rstrip().endswith("# EOF")


def test_without_prometheus_client_the_view_is_a_501_and_nothing_breaks(db, monkeypatch):
    for name in [m for m in sys.modules if m.startswith("prometheus_client")]:
        monkeypatch.setitem(sys.modules, name, None)  # every import of it now fails
    reloaded = importlib.reload(views)  # importing the view module never needs it
    try:
        response = reloaded.metrics_view(RequestFactory().get("/metrics/"))
        assert response.status_code == 501
        body = response.content.decode()
        assert body.count("\n") == 1 and "pip install 'prometheus-client>=0.20'" in body
        with pytest.raises(ImportError, match="prometheus-client is not installed"):
            metrics.registry()
        metrics.inc("xjobs_job_leases_lost_total", queue="no-prometheus")  # counters still count
        assert metrics.value("xjobs_job_leases_lost_total", queue="no-prometheus") >= 1
    finally:
        monkeypatch.undo()
        importlib.reload(views)


# --- the admin, the CLI and the metrics agree ------------------------------------------------


def test_admin_cli_and_metrics_show_the_same_numbers(admin_client):
    known_rows()
    out = StringIO()
    call_command("xjobs", "queues", "--json", stdout=out)
    cli = {q["queue"]: q for q in json.loads(out.getvalue())["queues"]}
    _, series = scrape()

    def admin(state: str, queue: str) -> int:
        page = admin_client.get(
            f"/admin/django_xjobs/job/?state__exact={state}&queue__exact={queue}"
        )
        assert page.status_code == 200
        return page.context["cl"].result_count

    gauges = {
        # bucket: (metric, admin state); every ready row here is due, so ready == queue_depth
        "ready": ("xjobs_queue_depth", "ready"),
        "delayed": ("xjobs_queue_delayed_jobs", "delayed"),
        "running": ("xjobs_queue_running_jobs", "running"),
        "suspended": ("xjobs_queue_suspended_jobs", "suspended"),
        "dead": ("xjobs_queue_dead_jobs", "dead"),
    }
    seen = {}
    for queue in ("default", "other"):
        for bucket, (metric, state) in gauges.items():
            numbers = (
                cli[queue][bucket],
                admin(state, queue),
                sample(series, metric, queue=queue),
            )
            assert numbers[0] == numbers[1] == numbers[2], (queue, bucket, numbers)
            seen[queue, bucket] = numbers[0]
        assert cli[queue]["oldest_ready_seconds"] == sample(
            series, "xjobs_queue_oldest_ready_seconds", queue=queue
        )
    assert seen == {
        ("default", "ready"): 2,
        ("default", "delayed"): 1,
        ("default", "running"): 0,
        ("default", "suspended"): 1,
        ("default", "dead"): 2,
        ("other", "ready"): 1,
        ("other", "delayed"): 0,
        ("other", "running"): 1,
        ("other", "suspended"): 0,
        ("other", "dead"): 0,
    }


# --- MET-01: at most one read per 15 s; a failed read still serves the counters -------------


def test_met_01_two_scrapes_within_15s_read_the_stats_once(db, monkeypatch):
    reads = []
    original = metrics.queue_depths

    def counted(driver):
        reads.append(1)
        return original(driver)

    monkeypatch.setattr(metrics, "queue_depths", counted)
    registry = metrics.registry()
    jobs.ok.enqueue(n=1)
    first = parse(_latest(registry))
    jobs.ok.enqueue(n=2)
    second = parse(_latest(registry))
    assert len(reads) == 1
    assert sample(first, "xjobs_queue_depth", queue="default") == 1
    assert sample(second, "xjobs_queue_depth", queue="default") == 1  # the same read

    monkeypatch.setattr(metrics._cache, "read_at", metrics._cache.read_at - metrics.STATS_INTERVAL)
    third = parse(_latest(registry))
    assert len(reads) == 2
    assert sample(third, "xjobs_queue_depth", queue="default") == 2


def test_met_01_a_failed_stats_read_warns_and_still_returns_the_counters(db, monkeypatch, caplog):
    def broken(driver):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(metrics, "queue_depths", broken)
    metrics.inc("xjobs_jobs_total", queue="met-01", outcome="ok")
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        series = parse(_latest(metrics.registry()))
    [record] = [
        r for r in caplog.records if getattr(r, "event", None) == "xjobs.metrics.depth_failed"
    ]
    assert record.levelno == logging.WARNING
    assert "the database went away" in str(record.fields["error"])
    assert not [key for key in series if key[0] == "xjobs_queue_depth"]
    assert sample(series, "xjobs_jobs_total", queue="met-01", outcome="ok") >= 1


def _latest(registry) -> str:
    from prometheus_client import generate_latest

    return generate_latest(registry).decode()


# --- MET-02: one jobs_total per settled run, by outcome ----------------------------------------


def test_met_02_jobs_total_counts_each_settled_run_by_outcome(transactional_db, caplog):
    def counts() -> dict[str, float]:
        return {
            outcome: metrics.value("xjobs_jobs_total", queue="default", outcome=outcome)
            for outcome in ("ok", "failed", "dead")
        }

    before = counts()
    jobs.ok.enqueue(n=1)
    jobs.terminal.enqueue(n=1)  # dead at once
    failing = jobs.fails.enqueue(n=1).id  # retried twice, then dead (3 attempts)
    jobs.sleeper.enqueue(n=1)  # suspended: not counted
    deadline = time.monotonic() + 30
    with caplog.at_level(logging.WARNING, logger="django_xjobs"):
        while Job.objects.get(id=failing).state != "dead":
            assert time.monotonic() < deadline, "the failing job never reached dead"
            with connection.cursor() as cursor:  # its retry is due now, not in 10 ms
                cursor.execute(
                    "UPDATE x_jobs SET run_at = now() - interval '1 second' WHERE id = %s",
                    [failing],
                )
            Worker(queues=["default"], driver=PostgresDriver("default"), burst=True).run()
    after = counts()
    assert {k: after[k] - before[k] for k in after} == {"ok": 1, "failed": 2, "dead": 2}
    failed = [r for r in caplog.records if getattr(r, "event", None) == "xjobs.attempt.failed"]
    assert sorted(r.levelname for r in failed) == ["ERROR", "ERROR", "WARNING", "WARNING"]


# --- xjobs_worker --metrics-port --------------------------------------------------------------


@pytest.mark.process
def test_the_worker_serves_metrics_on_its_port(transactional_db):
    port = free_port()
    jobs.ok.enqueue(n=1)
    jobs.terminal.enqueue(n=1)
    worker = WorkerProcess("--queues", "default", "--metrics-port", str(port))
    try:

        def scraped() -> Series | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    series = parse(r.read().decode())
            except OSError:
                return None
            done = [
                sample(series, "xjobs_jobs_total", queue="default", outcome=o)
                for o in ("ok", "dead")
            ]
            return series if done == [1, 1] else None

        series = wait_for(scraped, what="the worker's metrics endpoint to count both runs")
        assert isinstance(series, dict)
        assert any(key[0] == "xjobs_queue_depth" for key in series)
        worker.send(signal.SIGTERM)
        code, _, err = worker.finish()
        assert code == 0, err
    finally:
        worker.kill()


def test_metrics_port_without_prometheus_client_is_a_clear_error(monkeypatch):
    from django.core.management import CommandError

    from django_xjobs.management.commands.xjobs_worker import _metrics_server

    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(CommandError, match=r"--metrics-port: prometheus-client is not installed"):
        _metrics_server(free_port())
    assert _metrics_server(None) is None


# --- issue 30: run time and wait histograms per queue ------------------------------------------


def test_the_worker_observes_run_time_and_wait_per_queue(transactional_db):
    def count(name: str) -> float:
        buckets, _ = metrics.histogram(name, "default")
        return buckets[-1][1]

    before = count("xjobs_job_duration_seconds"), count("xjobs_job_wait_seconds")
    buckets_before, waited_before = metrics.histogram("xjobs_job_wait_seconds", "default")
    jobs.ok.enqueue(n=1)
    jobs.terminal.enqueue(n=1)
    with connection.cursor() as cursor:  # both were due 20 s ago
        cursor.execute("UPDATE x_jobs SET run_at = now() - interval '20 seconds'")
    Worker(queues=["default"], driver=PostgresDriver("default"), burst=True).run()
    after = count("xjobs_job_duration_seconds"), count("xjobs_job_wait_seconds")
    assert (after[0] - before[0], after[1] - before[1]) == (2, 2)
    buckets, waited = metrics.histogram("xjobs_job_wait_seconds", "default")
    assert 40 <= waited - waited_before < 60
    added = {le: n - dict(buckets_before)[le] for le, n in buckets}
    assert (added["10.0"], added["30.0"]) == (0, 2)  # both in (10, 30]
    series = parse(_latest(metrics.registry()))
    assert sample(series, "xjobs_job_wait_seconds_count", queue="default") >= 2
    assert sample(series, "xjobs_job_duration_seconds_bucket", queue="default", le="+Inf") >= 2
