"""``--health-port`` on real ``xjobs_worker``, ``xjobs_scheduler`` and ``xjobs_relay``
processes (issue 29, SPEC HEALTH-01..04): probed over HTTP as a kubelet would.

Each process binds port 0 and logs the port it got (``xjobs.health.listening``); waits are
polls with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import json
import re
import signal
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator

import pytest

from django_xjobs.models import Job
from tests import jobs
from tests.support.process import ManageProcess, ledger, wait_for, worker_env
from tests.support.proxy import CuttableProxy

pytestmark = pytest.mark.process


def probe(process: ManageProcess, path: str) -> tuple[int, dict]:
    """(status, JSON body) of ``GET path`` on the process's health port."""
    port = health_port(process)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def health_port(process: ManageProcess) -> int:
    def found() -> int | None:
        for line in list(process.err):
            if "xjobs.health.listening" in line:
                return int(re.search(r"port=(\d+)", line).group(1))  # type: ignore[union-attr]
        return None

    return wait_for(found, timeout=30, what="the health port to be logged")  # type: ignore[return-value]


def answers(process: ManageProcess, path: str, status: int) -> Callable[[], bool]:
    return lambda: probe(process, path)[0] == status


@pytest.fixture
def manage(transactional_db) -> Iterator[Callable[..., ManageProcess]]:
    started: list[ManageProcess] = []

    def start(command: str, *args: str, env: dict[str, str] | None = None) -> ManageProcess:
        process = ManageProcess(command, *args, env=env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def test_health_02_03_a_worker_is_live_and_ready_then_not_ready_while_it_drains(manage):
    worker = manage("xjobs_worker", "--queues", "default", "--health-port", "0")
    wait_for(answers(worker, "/livez", 200), what="livez 200")
    status, body = probe(worker, "/readyz")
    assert (status, body["status"], body["role"]) == (200, "ok", "worker")
    # loopback unless --health-host says otherwise (HEALTH-01)
    assert worker.saw("host=127.0.0.1")

    token = f"health-{uuid.uuid4()}"
    job_id = jobs.ledger.enqueue(token=token, hold=4.0, heed_signal=False).id
    wait_for(lambda: ledger(token, "start"), what="the held run to start")
    worker.send(signal.SIGTERM)
    # draining: the run in flight keeps the process up, and readiness is withdrawn at once
    wait_for(answers(worker, "/readyz", 503), timeout=3, what="readyz 503 while draining")
    status, body = probe(worker, "/readyz")
    assert (status, body["reason"]) == (503, "draining")
    assert not ledger(token, "done"), "the drain was over before readiness was seen withdrawn"
    assert probe(worker, "/livez")[0] == 200  # alive while it drains: no kill mid-drain
    code, _, err = worker.finish()
    assert code == 0, err
    assert Job.objects.get(id=job_id).state == "done"


def test_health_02_03_livez_never_asks_the_database_readyz_does(manage):
    proxy = CuttableProxy()
    try:
        worker = manage(
            "xjobs_worker",
            "--queues",
            "default",
            "--health-port",
            "0",
            "--poll-interval",
            "200ms",
            env=worker_env(proxy.url()),
        )
        wait_for(answers(worker, "/readyz", 200), what="readyz 200")
        # the cut comes once the loop is announced. A cut at that moment used to end the
        # worker: marking its thread a role thread ran a statement on the connection its
        # presence had just used, and the error left the loop before it started ("draining",
        # three times in CI). That start is pinned in tests/worker/test_watchdog.py
        # (test_hang_01_a_role_starts_on_a_connection_the_database_dropped).
        wait_for(lambda: worker.saw("xjobs.worker.started"), timeout=30, what="the loop to start")
        proxy.cut()
        wait_for(answers(worker, "/readyz", 503), timeout=15, what="readyz 503, database cut")
        status, body = probe(worker, "/readyz")
        said = "\n".join(list(worker.err)[-60:])
        assert status == 503 and "database default" in body["reason"], said
        assert probe(worker, "/livez")[0] == 200, said  # an outage restarts no pod
        proxy.restore()
        wait_for(answers(worker, "/readyz", 200), timeout=15, what="readyz 200 again")
    finally:
        proxy.close()


@pytest.mark.parametrize("command", ["xjobs_scheduler", "xjobs_relay"])
def test_health_04_the_scheduler_and_the_relay_answer_the_same_probes(manage, command):
    process = manage(command, "--health-port", "0")
    wait_for(answers(process, "/readyz", 200), what=f"{command} readyz 200")
    status, body = probe(process, "/livez")
    assert (status, body["role"]) == (200, command.removeprefix("xjobs_"))
    assert probe(process, "/nope")[0] == 404
    process.send(signal.SIGTERM)
    code, _, err = process.finish()
    assert code == 0, err


def test_health_01_processes_share_no_health_port(manage):
    process = manage("xjobs_worker", "--processes", "2", "--health-port", "0")
    code, _, err = process.finish()
    assert code != 0 and "--health-port cannot be shared by --processes" in err


def test_health_01_a_port_out_of_range_is_one_clear_error():
    from django.core.management import CommandError

    from django_xjobs.management import health

    with pytest.raises(CommandError, match="X_INVARIANT: --health-port 70000 is not a TCP port"):
        health.start({"health_port": 70000}, health.Health("worker", []))


def test_health_03_a_drain_the_role_began_itself_is_not_ready():
    from django_xjobs.management import health

    state = {"now": "running"}
    probes = health.Health("worker", [], state=lambda: state["now"])
    assert probes.live() == (False, "the worker loop is not running")

    def loop() -> None:
        assert probes.ready() == (True, "ready")
        state["now"] = "draining"  # a recycle drains with no signal
        assert probes.ready() == (False, "draining")
        assert probes.live() == (True, "live")

    probes.wrap_run(loop)()
    assert probes.live() == (False, "the worker loop is not running")  # the loop returned
