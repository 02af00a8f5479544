"""``XJOBS["READ_DATABASE"]`` for the operator's remaining reads (issue 46 item 2, SPEC READ-06..10):
the dead letters, the outbox, the events, the batches and the audit trail read the alias, in the
API and ``manage.py xjobs``; what was just written (an event, a batch, an action) is still found
by its id; the answer an operator action returns reads the jobs database; a read database that
is down is the coded error. The ``replica`` alias is a second database on the suite's server
holding rows the jobs database does not (tests/support/reads.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from django_xjobs import operations, publish_event
from django_xjobs.errors import ReadDatabaseUnavailableError
from django_xjobs.models import JobBatch, JobEvent, OperatorAction, OutboxEntry
from django_xjobs.operations.batches import batch_report, inspect_batch
from tests import jobs
from tests.support.reads import BOTH, REPLICA, gone_alias, reading_from, seed_replica


def xjobs(*args: str):
    out = StringIO()
    call_command("xjobs", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def _staged(alias: str, key: str, **more: object) -> OutboxEntry:
    return OutboxEntry.objects.using(alias).create(
        job="tests.jobs.ok", input={"n": 1}, idempotency_key=key, **more
    )


@pytest.mark.django_db(databases=BOTH)
def test_read_06_the_dead_letters_read_the_alias():
    _, dead_there = seed_replica()
    with reading_from():
        assert [d["id"] for d in operations.inspect_dead_letters()] == [str(dead_there)]
        assert [d["id"] for d in xjobs("dead")] == [str(dead_there)]
    assert operations.inspect_dead_letters() == []  # the jobs database holds none


@pytest.mark.django_db(databases=BOTH)
def test_read_07_the_outbox_of_the_jobs_database_reads_the_alias_and_an_action_the_primary():
    _staged(REPLICA, "pending-there")
    quarantined = _staged(
        REPLICA, "stuck-there", quarantined_at=timezone.now(), error_code="54000", error="big"
    )
    here = _staged(
        "default", "stuck-here", quarantined_at=timezone.now(), error_code="X", error="x"
    )
    with reading_from():
        report = operations.inspect_outbox()
        assert (report["pending"], report["quarantined"]) == (1, 1)
        assert [e["id"] for e in report["entries"]] == [str(quarantined.id)]
        assert xjobs("outbox")["entries"][0]["key_start"] == "stuck-there"
        # an operator acts on the jobs database, and its answer is read there
        after = operations.retry_outbox_entry(here.id, by="ops:test")
        assert (after["pending"], after["quarantined"]) == (1, 0)
    assert operations.inspect_outbox()["quarantined"] == 0


@pytest.mark.django_db(databases=BOTH)
def test_read_08_the_events_read_the_alias_and_a_new_one_is_found_by_its_id():
    there = JobEvent.objects.using(REPLICA).create(
        name="seen.there", payload={"n": 1}, expires_at=timezone.now() + timedelta(hours=1)
    )
    here = publish_event("seen.here", {"n": 2}).id
    with reading_from():
        assert [e["name"] for e in operations.list_events()] == ["seen.there"]
        assert [e["id"] for e in xjobs("events")] == [str(there.id)]
        assert operations.inspect_event(there.id).payload == {"n": 1}
        # just published: not on the read database yet, found where it was written
        assert operations.inspect_event(here).payload == {"n": 2}
        assert xjobs("events", str(here))["name"] == "seen.here"
    assert [e["name"] for e in operations.list_events()] == ["seen.here"]


@pytest.mark.django_db(databases=BOTH)
def test_read_09_the_batches_read_the_alias_and_a_new_one_is_found_by_its_id():
    there = JobBatch.objects.using(REPLICA).create(input={"file": "there.csv"})
    here = JobBatch.objects.using("default").create(input={"file": "here.csv"})
    with reading_from():
        assert [b.id for b in batch_report(None)[0]] == [str(there.id)]
        assert [b["id"] for b in xjobs("batch")] == [str(there.id)]
        assert inspect_batch(there.id).input == {"file": "there.csv"}
        assert inspect_batch(here.id).input == {"file": "here.csv"}  # found on the primary
        assert xjobs("batch", str(here.id))["id"] == str(here.id)
    assert [b.id for b in batch_report(None)[0]] == [str(here.id)]


@pytest.mark.django_db(databases=BOTH)
def test_read_10_the_audit_trail_reads_the_alias_and_a_new_action_is_found_by_its_id():
    there = OperatorAction.objects.using(REPLICA).create(actor="ops:there", verb="cancel")
    job_id = jobs.ok.using(delay=3600).enqueue(n=1).id
    with reading_from():
        operations.cancel_job(job_id, "no", by="ops:here")  # written on the jobs database
        assert [a["actor"] for a in operations.inspect_audit()] == ["ops:there"]
        assert [a["id"] for a in xjobs("audit")] == [str(there.id)]
        [mine] = OperatorAction.objects.using("default").filter(actor="ops:here")
        assert operations.inspect_action(mine.id)["verb"] == "cancel_job"  # on the primary
        assert operations.inspect_action(there.id)["actor"] == "ops:there"
    assert [a["actor"] for a in operations.inspect_audit()] == ["ops:here"]


@pytest.fixture
def down(django_db_setup, django_db_blocker):
    """A read database whose server is not there (outside a test transaction: Django's test
    case refuses an alias it was not set up with), so the test only reads."""
    with django_db_blocker.unblock(), gone_alias() as gone, reading_from(gone):
        yield gone


@pytest.mark.parametrize(
    "verb", ["dead", "outbox", "events", "batch", "audit"], ids=lambda verb: verb
)
def test_read_06_10_a_read_database_that_is_down_is_one_coded_line(down, verb):
    with pytest.raises(CommandError, match="X_READ_DATABASE_UNAVAILABLE"):
        xjobs(verb)


def test_read_06_10_the_api_raises_the_coded_error_when_it_is_down(down):
    for read in (
        operations.inspect_dead_letters,
        operations.inspect_outbox,
        operations.list_events,
        operations.inspect_audit,
        lambda: batch_report(None),
    ):
        with pytest.raises(ReadDatabaseUnavailableError) as refused:
            read()
        assert down in refused.value.message
