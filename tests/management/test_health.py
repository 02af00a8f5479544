"""The probe server itself, over real sockets in this process (the roles' probes, through real
processes, are in tests/management/test_health_fleet.py)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from django_xjobs.management import health
from tests.support.process import wait_for

pytestmark = pytest.mark.timeout(60)

#: the documented bound (health.MAX_CONNECTIONS), spelt out so the case runs on any version
MAX_CONNECTIONS = 16


@pytest.fixture
def probe(monkeypatch) -> Iterator[tuple[str, int]]:
    # the test's deadline, not a wait (raising=False: the case also runs on a version without it)
    monkeypatch.setattr(health, "IDLE_TIMEOUT", 0.5, raising=False)
    state = health.Health("worker", databases=[])
    state.wrap_run(lambda: None)  # never run: /livez says so, which is all a probe needs here
    server = health.serve(state, 0)
    try:
        yield server.server_address[0], server.server_address[1]
    finally:
        health.stop(server)


def serving_threads() -> int:
    return sum("process_request_thread" in t.name for t in threading.enumerate())


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed ``sock`` (a read returns end of stream or a reset)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def get(host: str, port: int, path: str) -> tuple[int, dict]:
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_health_06_idle_connections_are_closed_and_hold_a_bounded_number_of_threads(probe):
    """Issue 40: 40 idle sockets held 40 threads (12 -> 52) until their peers closed them. Each
    connection's reads now time out, and past ``MAX_CONNECTIONS`` one is closed at once."""
    host, port = probe
    before = serving_threads()
    idle = [socket.create_connection((host, port), timeout=5) for _ in range(40)]
    seen = [serving_threads()]

    def all_closed() -> bool:
        seen.append(serving_threads())
        return all(closed_by_server(s) for s in idle)

    try:
        wait_for(all_closed, timeout=30, what="the server to close every idle connection")
        assert max(seen) - before <= MAX_CONNECTIONS, max(seen)
        wait_for(
            lambda: serving_threads() <= before,
            timeout=30,
            what="each connection's thread to end with it",
        )
    finally:
        for sock in idle:
            sock.close()
    code, body = get(host, port, "/livez")  # the probe still answers afterwards
    assert code == 503 and body["role"] == "worker"
