"""``manage.py xjobs partitions`` (issue 46): the history's days made ahead and listed, the
mover and retention on demand with ``--move`` and ``--drop``, ``--json``, the coded refusals;
and the verbs that read or retry a job finding it in the history."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from django_xjobs import metrics
from django_xjobs.drivers import get_driver
from django_xjobs.models import Job, JobHistory
from django_xjobs.testing.factories import DeadJobFactory, DoneJobFactory
from tests.support.database import no_history_days

ON = {"HISTORY": True, "RETENTION": {"done": "1d"}}
OFF = {"HISTORY": False}  # the way out of the default


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


def test_hist_06_partitions_are_made_ahead_and_listed(db):
    no_history_days(get_driver())
    made = json.loads(xjobs("partitions", "--ahead", "1", "--json"))
    assert len(made["created"]) == 4 * 2  # each finished state: today and tomorrow
    assert (made["enabled"], made["moved"], made["dropped"]) == (True, 0, [])  # on by default
    again = json.loads(xjobs("partitions", "--ahead", "1", "--json"))
    assert again["created"] == [] and again["partitions"] == made["partitions"]
    with override_settings(XJOBS=OFF):
        text = xjobs("partitions", "--ahead", "0")
    assert "history: off" in text
    assert "dead       " in text and "2 day(s), kept" in text


@pytest.mark.parametrize(
    "args", [("--ahead", "x"), ("--ahead", "-1"), ("--ahead", "400"), ("--move",), ("--drop",)]
)
def test_hist_06_a_bad_ahead_or_a_move_with_history_off_is_one_coded_line(db, args):
    with override_settings(XJOBS=OFF), pytest.raises(CommandError, match="X_INVARIANT"):
        xjobs("partitions", *args)


def test_hist_04_hist_05_move_then_show_ls_and_retry_find_the_job(db):
    dead = DeadJobFactory()
    done = DoneJobFactory()
    get_driver().jobs().age(2 * 86400, only={"jobs"})
    before = metrics.value("xjobs_history_moved_total")
    with override_settings(XJOBS=ON):
        text = xjobs("partitions", "--move", "--drop")
    assert "moved 2 finished job(s)" in text
    assert metrics.value("xjobs_history_moved_total") == before + 2
    assert "(past RETENTION)" in text  # the done job's day, two days back
    assert not Job.objects.filter(pk__in=[dead.pk, done.pk]).exists()
    assert list(JobHistory.objects.values_list("id", flat=True)) == [dead.id]
    assert json.loads(xjobs("show", str(dead.id), "--json"))["state"] == "dead"
    assert str(dead.id) in xjobs("ls", "--state", "dead")
    assert str(dead.id) in xjobs("dead")
    assert json.loads(xjobs("why", str(dead.id)[:13], "--json"))["state"] == "dead"  # a prefix
    xjobs("retry", str(dead.id))
    assert Job.objects.get(pk=dead.pk).state == "ready"
    assert not JobHistory.objects.exists()


def test_hist_09_ls_filters_and_the_bulk_verbs_find_moved_jobs(db):
    """``xjobs ls --error-code/--input`` and ``xjobs retry``/``delete`` by filter, on jobs that
    moved: each finds them where they live."""
    card = DeadJobFactory(terminal=True, input={"order_id": 4711})
    other = DeadJobFactory(input={"order_id": 1})
    get_driver().jobs().age(2 * 3600, only={"jobs"})
    assert get_driver().history().move_finished(grace=3600) == 2
    listed = xjobs("ls", "--error-code", "X_TERMINAL")
    assert str(card.id) in listed and str(other.id) not in listed
    assert str(other.id) in xjobs("ls", "--input", '{"order_id": 1}')
    looked = json.loads(xjobs("retry", "--state", "dead", "--dry-run", "--json"))
    assert looked["matched"] == 2
    xjobs("retry", "--error-code", "X_TERMINAL", "--yes")
    assert Job.objects.get(pk=card.pk).state == "ready"
    xjobs("delete", "--state", "dead", "--yes")
    assert not JobHistory.objects.exists()
    assert Job.objects.filter(pk=card.pk).exists()  # live again: not deleted
