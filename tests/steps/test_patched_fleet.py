"""``ctx.step.patched`` under a real crash (issue 44, SPEC VER-11): a worker is SIGKILLed in the
middle of the step after the patch, and another worker process replays the run once its lease
lapses. A run that took the patch replays its marker and never does the patched step again; a
run started by a worker of the code from before the patch (``XJOBS_TEST_PATCH=0``) is told
False again and never does it at all. The ledger the handler writes decides."""

from __future__ import annotations

import uuid

import pytest

from django_xjobs.drivers import get_driver
from django_xjobs.models import Job
from tests import versioned
from tests.models import Ledger
from tests.support.process import wait_for, worker_env

pytestmark = pytest.mark.process

ARGS = (
    "--queues",
    "default",
    "--concurrency",
    "2",
    "--poll-interval",
    "100ms",
    "--visibility-timeout",
    "2s",
)


def worker(workers, patch: bool):
    return workers(*ARGS, env={**worker_env(), "XJOBS_TEST_PATCH": "1" if patch else "0"})


def phases(token: str) -> list[str]:
    return list(Ledger.objects.filter(token=token).values_list("phase", flat=True))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("old", [False, True], ids=["new-run", "old-run"])
def test_ver_11_a_run_replayed_after_its_worker_was_killed_answers_as_it_first_did(workers, old):
    token = f"crash-{uuid.uuid4().hex[:8]}"
    job_id = versioned.patched.enqueue(token=token, hold=600.0).id
    first = worker(workers, patch=not old)
    wait_for(
        lambda: Job.objects.filter(id=job_id, state="suspended").exists(),
        timeout=60,
        what="the run asleep in its nap",
    )
    first.kill()
    get_driver().jobs().age(3601)  # the nap is over
    doomed = worker(workers, patch=True)  # the code with the patch, from here on
    wait_for(lambda: "after-began" in phases(token), timeout=60, what="the last step begun")
    doomed.kill()  # SIGKILL in the middle of the step after the patch
    worker(workers, patch=True)
    wait_for(
        lambda: Job.objects.filter(id=job_id, state="done").exists(),
        timeout=90,
        what="the run replayed by another worker once its lease lapsed",
    )
    row = Job.objects.get(id=job_id)
    assert row.result == {"checked": not old}
    expected = ["before", "after-began", "after"]
    if not old:
        expected.insert(1, "fraud-check")  # done once, before the crash, and replayed after
    assert phases(token) == expected
