"""``XJOBS["READ_DATABASE"]`` (issue 46 item 2): the read surfaces read the alias, every write,
claim and settle stays on the jobs database, the answers say how old their figures are, and a
read database that is down is said, never a crash. The ``replica`` alias is a second database
on the suite's server holding rows the jobs database does not (tests/support/reads.py)."""

from __future__ import annotations

import json
import logging
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import RequestFactory, override_settings

from django_xjobs import conf, metrics, operations, views, why_job
from django_xjobs.drivers.reading import ReadSource, read_driver, reading, reading_primary
from django_xjobs.errors import ConfigInvalidError, ReadDatabaseUnavailableError
from django_xjobs.models import Job
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.support.reads import BOTH, MIRRORED, REPLICA, gone_alias, reading_from, seed_replica


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


@pytest.fixture(autouse=True)
def _fresh_scrape():
    metrics.clear_cache()
    yield
    metrics.clear_cache()


def scrape() -> str:
    response = views.metrics_view(RequestFactory().get("/metrics/"))
    assert response.status_code == 200
    return response.content.decode()


# --- READ-05: the setting ----------------------------------------------------------------------


def test_read_05_a_read_database_that_is_no_alias_is_refused_with_a_hint(settings):
    with pytest.raises(ConfigInvalidError) as refused:
        conf.validate({"READ_DATABASE": "replcia"})
    assert refused.value.code == "X_CONFIG_INVALID"
    assert "READ_DATABASE" in refused.value.message and "replcia" in refused.value.message
    assert "aliases: " in refused.value.hint and REPLICA in refused.value.hint
    with pytest.raises(ConfigInvalidError):
        conf.validate({"READ_DATABASE": 5})
    # the jobs database itself, or None: no read database (reads stay where they were)
    assert conf.validate({"READ_DATABASE": "default"}).read_database is None
    assert conf.validate({}).read_database is None
    assert conf.validate({"READ_DATABASE": REPLICA}).read_database == REPLICA


def test_read_05_the_system_check_reports_it():
    from django.core import checks

    with override_settings(XJOBS={"READ_DATABASE": "nowhere"}):
        found = [m for m in checks.run_checks() if m.id == "django_xjobs.E001"]
    assert found and "READ_DATABASE" in found[0].msg


# --- READ-01: reads from the alias, writes on the jobs database ---------------------------------


@pytest.mark.django_db(databases=BOTH)
def test_read_01_the_read_surfaces_read_the_alias_and_every_write_the_jobs_database():
    on_replica, dead_there = seed_replica()
    with reading_from():
        # writes land on the jobs database: an enqueue, a claim and settle, an operator's cancel
        done = jobs.ok.enqueue(n=1).id
        second = jobs.ok.enqueue(n=2).id
        run_until_idle()  # claims and settles the jobs database's two rows
        cancelled = jobs.ok.using(delay=3600).enqueue(n=3).id
        assert operations.cancel_job(cancelled, "no")["state"] == "cancelled"
        assert Job.objects.using("default").get(id=done).state == "done"
        assert Job.objects.using("default").get(id=second).state == "done"
        assert not Job.objects.using(REPLICA).filter(id__in=[done, second, cancelled]).exists()
        assert Job.objects.using(REPLICA).get(id=on_replica).state == "ready"  # never claimed

        # ... and the read surfaces read the replica: the queues, the list, a job, why
        report = operations.inspect_queues()
        assert [q["queue"] for q in report["queues"]] == [MIRRORED]
        assert (report["totals"]["ready"], report["totals"]["dead"]) == (2, 1)
        assert report["read_from"] == {
            "database": REPLICA,
            "replica": True,
            "standby": False,
            "lag_seconds": 0.0,
            "problem": None,
        }
        listed = {r["id"] for r in operations.list_jobs()}
        assert str(on_replica) in listed and str(dead_there) in listed
        assert str(done) not in listed
        assert operations.inspect_job(on_replica)["queue"] == MIRRORED
        assert why_job(on_replica).queue == MIRRORED
        # a job the read database has not replayed yet is read where it was written
        assert operations.inspect_job(done)["state"] == "done"
        assert why_job(done).reasons[0].code == "finished"
        # the reads an operator acts on read the jobs database
        with reading_primary():
            assert operations.inspect_job(on_replica) is None
            assert {r["id"] for r in operations.list_jobs()} == {
                str(done),
                str(second),
                str(cancelled),
            }
    # without READ_DATABASE, nothing changes: the jobs database is read
    assert operations.inspect_job(on_replica) is None
    assert operations.inspect_queues()["read_from"]["database"] == "default"


@pytest.mark.django_db(databases=BOTH)
def test_read_01_xjobs_ls_show_queues_and_why_read_the_alias():
    on_replica, _ = seed_replica()
    here = jobs.ok.enqueue(n=1).id
    with reading_from():
        listed = [r["id"] for r in json.loads(xjobs("ls", "--json"))]
        assert str(on_replica) in listed and str(here) not in listed
        assert json.loads(xjobs("show", str(on_replica), "--json"))["queue"] == MIRRORED
        queues = json.loads(xjobs("queues", "--json"))
        assert [q["queue"] for q in queues["queues"]] == [MIRRORED]
        assert queues["read_from"]["database"] == REPLICA
        assert f"read from {REPLICA!r}, 0.0 s behind" in xjobs("queues")
        assert json.loads(xjobs("why", str(on_replica), "--json"))["queue"] == MIRRORED
    # the jobs database by default
    assert [r["id"] for r in json.loads(xjobs("ls", "--json"))] == [str(here)]
    assert "behind" not in xjobs("queues")


@pytest.mark.django_db(databases=BOTH)
def test_read_03_the_metrics_read_the_alias_and_export_its_age():
    seed_replica()
    jobs.ok.enqueue(n=1)  # on the jobs database's default queue
    with reading_from():
        text = scrape()
    assert f'xjobs_queue_depth{{queue="{MIRRORED}"}} 2.0' in text
    assert 'xjobs_queue_depth{queue="default"}' not in text
    assert "xjobs_read_lag_seconds 0.0" in text
    assert f'xjobs_read_database_up{{database="{REPLICA}"}} 1.0' in text
    metrics.clear_cache()
    text = scrape()  # no READ_DATABASE: the jobs database, current, and no up sample
    assert 'xjobs_queue_depth{queue="default"} 1.0' in text
    assert "xjobs_read_lag_seconds 0.0" in text
    assert "xjobs_read_database_up{" not in text


# --- READ-02: how old the figures are --------------------------------------------------------


@pytest.mark.django_db(databases=BOTH)
def test_read_02_the_source_says_where_and_how_old():
    with reading_from():
        driver, source = read_driver()
        assert driver.database == REPLICA
        assert source == ReadSource(REPLICA, replica=True, standby=False, lag_seconds=0.0)
        assert source.note() == f"read from {REPLICA!r}, 0.0 s behind the jobs database"
        with reading() as pinned:  # one read of the source for the block
            assert read_driver()[1] is not None and pinned.database == REPLICA
            with reading_primary() as primary:
                assert read_driver()[0].database == "default" and primary.replica is False
    driver, source = read_driver()
    assert (driver.database, source.replica, source.lag_seconds, source.note()) == (
        "default",
        False,
        0.0,
        None,
    )
    assert ReadSource(REPLICA, replica=True, standby=True, lag_seconds=None).note() == (
        f"read from {REPLICA!r}, a standby that has replayed nothing yet"
    )


# --- READ-04: a read database that does not answer -------------------------------------------


@pytest.fixture
def down(django_db_setup, django_db_blocker):
    """A read database whose server is not there. Outside a test transaction (Django's test
    case refuses an alias it was not set up with), so the test only reads."""
    with django_db_blocker.unblock(), gone_alias() as gone, reading_from(gone):
        yield gone


def test_read_04_a_read_database_that_is_down_is_a_coded_error_or_a_said_fallback(down, caplog):
    with pytest.raises(ReadDatabaseUnavailableError) as refused:
        operations.inspect_queues()
    assert refused.value.code == "X_READ_DATABASE_UNAVAILABLE"
    assert down in refused.value.message and "start the replica" in refused.value.hint
    with pytest.raises(ReadDatabaseUnavailableError):
        operations.list_jobs()
    # the command line: one coded line, no traceback, no quiet read of the primary
    with pytest.raises(CommandError, match="X_READ_DATABASE_UNAVAILABLE"):
        xjobs("queues", "--json")
    # a page or a scrape reads the jobs database instead, and says so
    with (
        caplog.at_level(logging.WARNING, logger="django_xjobs"),
        reading(fallback=True) as source,
    ):
        assert operations.inspect_queues()["read_from"]["database"] == "default"
    assert source.problem is not None
    assert source.problem.startswith("X_READ_DATABASE_UNAVAILABLE: ")
    assert "read from the jobs database 'default' instead" in (source.note() or "")
    assert any(getattr(r, "event", None) == "xjobs.read.fallback" for r in caplog.records)
    text = scrape()
    assert f'xjobs_read_database_up{{database="{down}"}} 0.0' in text
    assert "xjobs_read_lag_seconds 0.0" in text  # the jobs database's figures: current
    assert "xjobs_queue_paused" in text  # the figures are there, read from the jobs database
