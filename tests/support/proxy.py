"""A TCP proxy on 127.0.0.1 in front of PostgreSQL, for faults a real network makes.

``blackhole()`` is a dead NAT or a failed-over proxy: every open connection stops forwarding in
both directions while its sockets stay open (no FIN, no RST), and new connections go through as
before. The kernel still acknowledges what the client sends, so TCP keepalives and
``tcp_user_timeout`` cannot see it: only a deadline the client keeps itself can.
``refuse()`` is an outage: open connections are reset and new ones refused until ``restore()``.

    with TcpProxy.to_url(database_url()) as proxy:
        env = worker_env(proxy.url(database_url()))
        ...
        proxy.blackhole()

One thread multiplexes every connection, so a test can run dozens through it.
"""

from __future__ import annotations

import selectors
import socket
import struct
import threading
from contextlib import suppress
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

Upstream = tuple[str, int] | str  # (host, port), or the path of a Unix socket


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream``; start with ``with`` or ``start()``."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.port: int = self.listener.getsockname()[1]
        self.selector = selectors.DefaultSelector()
        self.peers: dict[socket.socket, socket.socket] = {}  # both directions of each pair
        self.held: list[socket.socket] = []  # blackholed: open, never read again
        self.accepted = 0
        self.refusing = False
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="tcp-proxy", daemon=True)

    @classmethod
    def to_url(cls, url: str) -> TcpProxy:
        """A proxy to the server of a ``postgres://`` URL (TCP, or ``?host=/socket/dir``)."""
        parts = urlsplit(url)
        socket_dir = parse_qs(parts.query).get("host", [""])[0] or (
            parts.hostname if (parts.hostname or "").startswith("/") else ""
        )
        port = parts.port or 5432
        if socket_dir:
            return cls(f"{socket_dir}/.s.PGSQL.{port}")
        return cls((parts.hostname or "127.0.0.1", port))

    def url(self, url: str) -> str:
        """``url`` with its host and port replaced by this proxy's (user, password, database
        and other query options kept)."""
        parts = urlsplit(url)
        userinfo = parts.netloc.rpartition("@")[0]
        query = "&".join(
            f"{key}={value}"
            for key, values in parse_qs(parts.query).items()
            if key != "host"
            for value in values
        )
        netloc = f"{userinfo}@127.0.0.1:{self.port}" if userinfo else f"127.0.0.1:{self.port}"
        return parts._replace(netloc=netloc, query=query).geturl()

    # --- faults -----------------------------------------------------------------------------

    def blackhole(self) -> int:
        """Stop forwarding on every open connection, leaving its sockets open; new connections
        are forwarded. Returns how many connections went dark."""
        with self.lock:
            pairs = self._pairs()
            for client, server in pairs:
                for sock in (client, server):
                    self.peers.pop(sock, None)
                    with suppress(KeyError, ValueError):
                        self.selector.unregister(sock)
                    self.held.append(sock)
            return len(pairs)

    def refuse(self) -> None:
        """Reset every open connection and refuse new ones until ``restore()``."""
        with self.lock:
            self.refusing = True
            for sock in list(self.peers):
                self._close(sock, reset=True)

    def restore(self) -> None:
        with self.lock:
            self.refusing = False

    @property
    def connections(self) -> int:
        """Connections forwarding now (blackholed ones not counted)."""
        with self.lock:
            return len(self.peers) // 2

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> TcpProxy:
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.thread.start()
        return self

    def close(self) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5)
        with self.lock:
            for sock in [*self.peers, *self.held]:
                with suppress(OSError):
                    sock.close()
            self.peers.clear()
            self.held.clear()
        self.listener.close()
        self.selector.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    # --- the loop ---------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self.stopping.is_set():
            # a short timeout: blackhole() and refuse() take effect between two waits
            for key, _ in self.selector.select(timeout=0.05):
                with self.lock:
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    if sock is self.listener:
                        self._accept()
                    elif sock in self.peers:
                        self._forward(sock)

    def _accept(self) -> None:
        with suppress(BlockingIOError):
            client, _ = self.listener.accept()
            if self.refusing:
                self._reset(client)
                return
            try:
                server = self._dial()
            except OSError:
                self._reset(client)
                return
            self.accepted += 1
            for sock in (client, server):
                sock.setblocking(True)
                self.selector.register(sock, selectors.EVENT_READ)
            self.peers[client], self.peers[server] = server, client

    def _dial(self) -> socket.socket:
        if isinstance(self.upstream, str):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(5)
            sock.connect(self.upstream)
            return sock
        return socket.create_connection(self.upstream, timeout=5)

    def _forward(self, sock: socket.socket) -> None:
        peer = self.peers[sock]
        try:
            data = sock.recv(65536)
            if data:
                peer.sendall(data)
                return
        except OSError:
            pass
        self._close(sock)  # an orderly end (or an error) on one side ends the pair

    def _close(self, sock: socket.socket, *, reset: bool = False) -> None:
        peer = self.peers.pop(sock, None)
        for each in (sock, peer):
            if each is None:
                continue
            self.peers.pop(each, None)
            with suppress(KeyError, ValueError):
                self.selector.unregister(each)
            if reset:
                self._reset(each)
            else:
                with suppress(OSError):
                    each.close()

    def _pairs(self) -> list[tuple[socket.socket, socket.socket]]:
        seen: set[socket.socket] = set()
        pairs = []
        for sock, peer in self.peers.items():
            if sock not in seen:
                seen.update((sock, peer))
                pairs.append((sock, peer))
        return pairs

    @staticmethod
    def _reset(sock: socket.socket) -> None:
        """Close with an RST (SO_LINGER 0), as a host that is down answers."""
        with suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with suppress(OSError):
            sock.close()
