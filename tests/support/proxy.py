"""A TCP proxy on 127.0.0.1 in front of the test database that can go silent on command: it
stops forwarding without closing a socket, as a dead NAT or a failed-over proxy does. Nothing
is refused and nothing is reset, so only the client's own bounds can notice."""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import parse_qs, urlsplit


class SilentProxy:
    """``url`` reaches the database at ``upstream`` through this proxy.

    ``freeze()`` silences the connections open now (new ones still pass: the heartbeat's fresh
    connections keep working, as in the issue); ``freeze(new=True)`` silences every connection,
    new ones included (a partition).
    """

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        socket_dir = parse_qs(parts.query).get("host", [""])[0]
        port = parts.port or 5432
        if socket_dir:
            self._target: object = f"{socket_dir}/.s.PGSQL.{port}"
            self._family = socket.AF_UNIX
        else:
            self._target = (parts.hostname or "127.0.0.1", port)
            self._family = socket.AF_INET
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._listener.getsockname()[1]
        user = parts.username or "postgres"
        secret = f":{parts.password}" if parts.password else ""
        self.url = f"postgres://{user}{secret}@127.0.0.1:{port}{parts.path}"
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._live: set[int] = set()  # ids of connections still forwarding
        self._next = 0
        self._silence_new = False
        self._closed = threading.Event()
        self.connections = 0
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def freeze(self, *, new: bool = False) -> None:
        with self._lock:
            self._live.clear()
            self._silence_new = self._silence_new or new

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in [self._listener, *sockets]:
            # shutdown wakes a thread blocked on the socket; close() alone would leave the
            # connection open until that call returned
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._sockets.append(client)
                self.connections += 1
                if self._silence_new:
                    continue  # accepted, held open, never answered
                number = self._next
                self._next += 1
                self._live.add(number)
            try:
                server = socket.socket(self._family, socket.SOCK_STREAM)
                server.connect(self._target)  # type: ignore[arg-type]
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.append(server)
            for src, dst in ((client, server), (server, client)):
                threading.Thread(
                    target=self._pump, args=(src, dst, number), name="proxy-pump", daemon=True
                ).start()

    def _pump(self, src: socket.socket, dst: socket.socket, number: int) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self._lock:
                    live = number in self._live
                if not live:
                    self._closed.wait()  # silent: keep both ends open, forward nothing
                    return
                dst.sendall(data)
        except OSError:
            pass
        if not self._closed.is_set():
            with self._lock:
                live = number in self._live
            if live:  # a clean close while forwarding passes through
                for sock in (src, dst):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
