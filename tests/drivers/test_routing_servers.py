"""One worker draining queues on two real PostgreSQL servers while one of them is stopped and
started again (issue 48): the ``reports`` queue's jobs live on a server of the test's own
(tests/support/server.py), every other queue's on the suite's. Each job writes its start and end
to the ledger on the suite's server; the ledger decides what ran, and how often. Waits are polls
on a condition with a deadline."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest

from tests.models import Ledger
from tests.support.process import ROOT, manage_argv, wait_for, worker_env
from tests.support.server import OwnServer

pytestmark = pytest.mark.process

SETTINGS = "--settings=tests.settings_routed"
ARGS = ("--queues", "default,reports", "--concurrency", "4", "--poll-interval", "200ms")


@pytest.fixture
def shard(transactional_db) -> Iterator[tuple[OwnServer, dict[str, str]]]:
    """A second server with a migrated database: (server, the environment of a process whose
    ``reports`` jobs live there)."""
    server = OwnServer.start()
    try:
        yield server, {**worker_env(), "XJOBS_SHARD_URL": server.migrated_database()}
    finally:
        server.close()


def enqueue(env: dict[str, str], queue: str, tokens: list[str]) -> subprocess.CompletedProcess:
    """Enqueue ``tests.jobs.ledger`` per token on ``queue``, as an application would."""
    code = (
        "from tests import jobs; "
        f"[jobs.ledger.using(queue={queue!r}).enqueue(token=t) for t in {tokens!r}]"
    )
    argv = [*manage_argv("shell", "-c", code), SETTINGS]
    return subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def done(tokens: list[str]) -> int:
    return Ledger.objects.filter(token__in=tokens, phase="done").count()


def shard_rows(env: dict[str, str], query: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(env["XJOBS_SHARD_URL"], autocommit=True, connect_timeout=10) as conn:
        return list(conn.execute(query).fetchall())


def test_shard_09_a_worker_drains_two_servers_and_one_that_stops_holds_back_only_its_queues(
    shard, workers
):
    """SPEC SHARD-09: the worker claims ``default`` on the suite's server and ``reports`` on the
    test's own; with that one stopped ``-m immediate`` the ``default`` queue keeps running; once
    it is started again its queue runs too, in the same worker process. No job runs twice."""
    server, env = shard
    worker = workers(*ARGS, SETTINGS, env=env)

    here = [f"here-{i}-{uuid.uuid4()}" for i in range(10)]
    there = [f"there-{i}-{uuid.uuid4()}" for i in range(10)]
    assert enqueue(env, "default", here).returncode == 0
    made = enqueue(env, "reports", there)
    assert made.returncode == 0, made.stderr
    wait_for(lambda: done(here + there) == 20, timeout=90, what="both servers' jobs to run")
    assert shard_rows(env, "SELECT queue, state, count(*) FROM x_jobs GROUP BY 1, 2") == [
        ("reports", "done", 10)
    ]

    server.stop()
    down = enqueue(env, "reports", ["never"])  # refused, coded, nothing written elsewhere
    assert down.returncode != 0 and "X_DRIVER_UNAVAILABLE" in down.stderr
    meanwhile = [f"meanwhile-{i}-{uuid.uuid4()}" for i in range(10)]
    assert enqueue(env, "default", meanwhile).returncode == 0
    wait_for(lambda: done(meanwhile) == 10, timeout=90, what="the default queue to keep running")

    server.resume()
    after = [f"after-{i}-{uuid.uuid4()}" for i in range(10)]
    made = enqueue(env, "reports", after)
    assert made.returncode == 0, made.stderr
    wait_for(lambda: done(after) == 10, timeout=120, what="the stopped server's queue to run again")

    assert worker.proc.poll() is None, "the worker exited"
    assert any("xjobs.route.alias_down" in line for line in list(worker.err))
    tokens = here + there + meanwhile + after
    runs = Ledger.objects.filter(token__in=tokens, phase="done")
    assert runs.count() == len(set(runs.values_list("token", flat=True))) == 40  # none twice
    assert not Ledger.objects.filter(token="never").exists()
