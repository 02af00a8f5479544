"""A queue's move killed between the two databases' commits (issue 48 item 5, SPEC SHARD-30):
``xjobs move-queue`` wrote its first page in ``shard`` and is SIGKILLed while ``default``'s
delete of that page has not committed (a trigger there ``pg_sleep``s inside it). The page is
then in both databases, the queue still paused in ``default``; the move run again finds the
page in ``shard`` by its ids, deletes it in ``default`` and moves the rest, and a real worker on
the routed settings runs every job once — counted by the ledger the runs write.
"""

from __future__ import annotations

import json
import signal
import uuid

import pytest

from django_xjobs.drivers import create
from django_xjobs.drivers.contract import EnqueueRequest
from django_xjobs.models import Job, QueueControl
from tests.models import Ledger
from tests.outbox import test_relay_fleet
from tests.outbox.test_crash_fleet import kill_and_end_backend
from tests.support.process import ManageProcess, WorkerProcess, run_manage, wait_for

pytestmark = [pytest.mark.process, pytest.mark.django_db(databases=["default", "shard"])]
lab = (
    test_relay_fleet.lab
)  # the fixture: processes killed, sleeping backends ended, triggers dropped

SETTINGS = "--settings=tests.settings_routed"


def enqueued_before_reroute(token: str) -> EnqueueRequest:
    payload = {"token": token}
    return EnqueueRequest(
        name="tests.jobs.ledger",
        queue="reports",
        input=payload,
        input_json=json.dumps(payload),
        idempotency_key=f"ledger:{token}",
        max_attempts=5,
    )


def held(alias: str, tokens: list[str]) -> int:
    keys = [f"ledger:{t}" for t in tokens]
    return Job.objects.using(alias).filter(idempotency_key__in=keys).count()


def runs(tokens: list[str]) -> dict[str, int]:
    counts = dict.fromkeys(tokens, 0)
    for token in Ledger.objects.filter(token__in=tokens, phase="done").values_list(
        "token", flat=True
    ):
        counts[token] += 1
    return counts


@pytest.mark.timeout(180)
def test_shard_30_a_move_killed_between_the_commits_loses_and_repeats_no_job(lab):
    run = uuid.uuid4().hex[:8]
    tokens = [f"{run}-{i}" for i in range(12)]
    source = create("postgres", using="default").jobs()
    for token in tokens:
        source.enqueue(enqueued_before_reroute(token))
    # default's delete of the first page stops: shard committed that page by then
    lab.sleep_trigger("hang_forget", "x_jobs", "DELETE", "OLD.queue = 'reports'", seconds=60)
    mover = ManageProcess(
        "xjobs", "move-queue", "reports", "--to", "shard", "--yes", "--batch", "5", SETTINGS
    )
    lab.started.append(mover)
    kill_and_end_backend(mover)
    lab.drop_triggers()
    assert (held("shard", tokens), held("default", tokens)) == (5, 12)  # the page in both
    control = QueueControl.objects.using("default").get(queue="reports")
    assert control.paused_at is not None  # a worker on the old settings takes none of it

    again = run_manage(
        "xjobs", "move-queue", "reports", "--to", "shard", "--yes", "--json", SETTINGS
    )
    assert again.returncode == 0, again.stderr
    done = json.loads(again.stdout)
    assert (done["moved"], done["merged"], done["left"]) == (7, 5, 0)
    assert (held("shard", tokens), held("default", tokens)) == (12, 0)
    control.refresh_from_db(using="default")
    assert control.paused_at is None  # the move resumed its own pause

    worker = WorkerProcess("--queues", "reports", "--poll-interval", "100ms", SETTINGS)
    lab.started.append(worker)
    wait_for(lambda: runs(tokens) == dict.fromkeys(tokens, 1), timeout=90, what="every job to run")
    worker.send(signal.SIGTERM)
    worker.finish()
    assert runs(tokens) == dict.fromkeys(tokens, 1)  # none twice: no copy is left anywhere
    assert held("default", tokens) == 0
