"""``XJOBS["READ_DATABASE"]`` on a real streaming replica (issue 46 item 2): a server of the
test's own and a hot standby of it made by ``pg_basebackup -R`` from the same binaries. The
read surfaces list what the standby has replayed, and say how far behind it is from
``pg_last_xact_replay_timestamp()``: paused replay shows as a growing lag and a job the list
does not hold yet; resumed replay, and the next commit, catch both up. Every write goes to the primary: a standby
refuses writes, so one sent there would fail the test."""

from __future__ import annotations

from io import StringIO

import psycopg
import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import RequestFactory, override_settings

from django_xjobs import metrics, operations, views
from django_xjobs.drivers.reading import read_driver
from django_xjobs.models import Job
from django_xjobs.testing import run_until_idle
from django_xjobs.testing.postgres import database_config
from tests import jobs
from tests.support.process import wait_for
from tests.support.reads import alias_for
from tests.support.server import OwnServer

pytestmark = pytest.mark.process


@pytest.fixture
def standby_reads(django_db_blocker):
    """XJOBS on a primary of the test's own (alias ``own``) reading its standby
    (``own_standby``); the standby's admin connection for the test to pause its replay."""
    own = OwnServer.start()
    try:
        url = own.migrated_database()
        name = database_config(url)["NAME"]
        standby = own.standby()
        try:
            primary_entry, standby_entry = database_config(url), database_config(standby.url(name))
            with (
                django_db_blocker.unblock(),
                alias_for("own", **primary_entry, TEST={}),
                alias_for("own_standby", **standby_entry, TEST={}),
                override_settings(
                    XJOBS={**settings.XJOBS, "DATABASE": "own", "READ_DATABASE": "own_standby"}
                ),
                psycopg.connect(standby.url(name), autocommit=True) as admin,
            ):
                yield admin
        finally:
            standby.close()
    finally:
        own.close()


def listed() -> set[str]:
    return {r["id"] for r in operations.list_jobs()}


def test_read_02_a_standby_reads_behind_by_its_replay_lag(standby_reads):
    first = str(jobs.ok.enqueue(n=1).id)
    wait_for(lambda: first in listed(), what="the standby to replay the enqueue")
    run_until_idle()  # claimed and settled on the primary: a standby refuses writes
    assert Job.objects.using("own").get(id=first).state == "done"
    wait_for(lambda: operations.list_jobs()[0]["state"] == "done", what="the settle replayed")
    source = read_driver()[1]
    assert source.database == "own_standby" and source.standby and source.replica
    assert source.lag_seconds is not None and source.lag_seconds >= 0.0

    # replay paused: the standby falls behind, and every surface says by how much
    standby_reads.execute("SELECT pg_wal_replay_pause()")
    wait_for(
        lambda: (
            standby_reads.execute("SELECT pg_get_wal_replay_pause_state()").fetchone()[0]
            == "paused"
        ),
        what="replay to pause",
    )
    second = str(jobs.ok.enqueue(n=2).id)
    lag = wait_for(
        lambda: (read_driver()[1].lag_seconds or 0.0) >= 1.0 and read_driver()[1].lag_seconds,
        what="the standby's lag to reach a second",
    )
    assert second not in listed()  # not replayed: the list is the standby's
    assert operations.inspect_job(second)["state"] == "ready"  # the page's lookup finds it
    report = operations.inspect_queues()
    assert report["read_from"]["standby"] is True
    assert report["read_from"]["lag_seconds"] >= lag
    out = StringIO()
    call_command("xjobs", "queues", stdout=out)
    assert "s behind the jobs database" in out.getvalue()
    metrics.clear_cache()
    text = views.metrics_view(RequestFactory().get("/metrics/")).content.decode()
    [scraped] = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("xjobs_read_lag_seconds ")
    ]
    assert scraped >= lag
    assert 'xjobs_read_database_up{database="own_standby"} 1.0' in text

    # replay resumed, and the primary commits again: the standby catches up, its lag falls
    standby_reads.execute("SELECT pg_wal_replay_resume()")
    wait_for(lambda: second in listed(), what="the standby to catch up")
    run_until_idle()
    wait_for(lambda: (read_driver()[1].lag_seconds or lag) < lag, what="the lag to fall back")
    metrics.clear_cache()
