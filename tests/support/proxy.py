"""TCP proxies on 127.0.0.1 in front of the test database, for outages made on command.

``SilentProxy`` stops forwarding without closing a socket, as a dead NAT or a failed-over proxy
does: nothing is refused and nothing is reset, so only the client's own bounds can notice.
``CuttableProxy`` closes every connection and refuses new ones, as a database that went away
does: every statement fails at once with a connection error."""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import parse_qs, quote, urlsplit

from django.db import connection


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


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in recv on it
    sock.close()


class CuttableProxy:
    """A TCP front for the test database that the test can cut (every connection closed, new
    ones closed on accept) and restore."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._up = True
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def url(self) -> str:
        db = connection.settings_dict
        user, password = quote(db["USER"] or ""), quote(db["PASSWORD"] or "")
        return f"postgres://{user}:{password}@127.0.0.1:{self.port}/{db['NAME']}"

    def cut(self) -> None:
        with self._lock:
            self._up = False
            pairs, self._pairs = self._pairs, []
        for client, server in pairs:
            _close(client)
            _close(server)

    def restore(self) -> None:
        with self._lock:
            self._up = True

    def close(self) -> None:
        self.listener.close()
        self.cut()

    def _upstream(self) -> socket.socket:
        db = connection.settings_dict
        host, port = db["HOST"] or "localhost", int(db["PORT"] or 5432)
        if host.startswith("/"):  # the embedded server listens on a Unix socket
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(f"{host}/.s.PGSQL.{port}")
            return sock
        return socket.create_connection((host, port), timeout=10)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            try:
                server = self._upstream()
                server.settimeout(None)
            except OSError:
                _close(client)
                continue
            # Whether the proxy is up is read under the lock that cut() holds while it takes
            # the connections to close: a connection accepted while a cut runs either joins
            # the list before the cut takes it, or sees the cut and is closed here. Read
            # before the upstream connect, a cut in between let one connection live through
            # the whole outage, and a worker renewed its leases over it.
            with self._lock:
                up = self._up
                if up:
                    self._pairs.append((client, server))
            if not up:
                _close(client)
                _close(server)
                continue
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)
