"""What a workload costs per job: statements sent, and CPU spent by the benchmark process, the
worker processes it waited for, and the PostgreSQL backends serving the benchmark's database.

Statements are counted where psycopg sends them (``Cursor.execute``/``executemany``), so Django's
cursors and raw connections are both seen; only this process's statements are, not those of
worker processes it starts. Backend CPU is read from ``/proc/<pid>/stat`` of each client backend
of the database, sampled on a thread: it is known only when the server runs on this machine and
its processes are readable (the embedded server, or a local one), else it shows as ``n/a``.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_SAMPLER = "bench-backend-cpu"
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class StatementCounter:
    """Counts the statements psycopg sends from this process, except the sampler's own."""

    def __init__(self) -> None:
        self.count = 0
        #: statements per server (its host, or socket directory), once ``split_by_host()``
        self.by_host: Counter[str] = Counter()
        self._split = False
        self._lock = threading.Lock()

    def split_by_host(self) -> None:
        """Count each statement under its server's host too (SHARD: two servers)."""
        self._split = True

    def install(self) -> None:
        import psycopg

        for method in ("execute", "executemany"):
            original = getattr(psycopg.Cursor, method)
            setattr(psycopg.Cursor, method, self._counting(original))

    def _counting(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(cursor: Any, query: Any, params: Any = None, *args: Any, **kwargs: Any) -> Any:
            if threading.current_thread().name != _SAMPLER:
                rows = len(params) if original.__name__ == "executemany" and params else 1
                host = cursor.connection.info.host if self._split else ""
                with self._lock:
                    self.count += rows
                    if self._split:
                        self.by_host[host] += rows
            return original(cursor, query, params, *args, **kwargs)

        return counted


COUNTER = StatementCounter()


#: what _cpu_ticks answers for a backend that exited since pg_stat_activity listed it
GONE = -1


def _cpu_ticks(pid: int) -> int | None:
    """utime + stime of a PostgreSQL process ``pid`` on this machine, None when unreadable,
    ``GONE`` when it exited in the meantime (a worker's short-lived renewal connection)."""
    try:
        with open(f"/proc/{pid}/comm") as comm:
            if not comm.read().startswith("postgres"):
                return None  # a remote server's pid that matches an unrelated local process
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (FileNotFoundError, ProcessLookupError):
        return GONE
    except (OSError, IndexError, ValueError):
        return None


class BackendCpu(threading.Thread):
    """Samples the CPU of every client backend of ``database`` until stopped; a backend that
    first appears during the window counts from zero (its connection started inside it)."""

    def __init__(self, connect: Callable[[], Any], every: float = 0.1) -> None:
        super().__init__(name=_SAMPLER, daemon=True)
        self.connect = connect
        self.every = every
        self.readable = True
        self._first: dict[int, int] = {}
        self._last: dict[int, int] = {}
        self._halt = threading.Event()
        self._primed = threading.Event()

    def run(self) -> None:
        with self.connect() as conn:
            first = True
            while True:
                self._sample(conn, first)
                if first:
                    first = False
                    self._primed.set()
                if self._halt.wait(self.every):
                    self._sample(conn, False)
                    return

    def _sample(self, conn: Any, baseline: bool) -> None:
        pids = [
            row[0]
            for row in conn.execute(
                """
                SELECT pid FROM pg_stat_activity
                WHERE datname = current_database() AND backend_type = 'client backend'
                  AND pid <> pg_backend_pid()
                """
            )
        ]
        for pid in pids:
            ticks = _cpu_ticks(pid)
            if ticks is None:
                self.readable = False
                continue
            if ticks == GONE:
                continue  # what it spent after its last sample is lost; the rest is counted
            self._first.setdefault(pid, ticks if baseline else 0)
            self._last[pid] = ticks

    def start_window(self) -> None:
        self.start()
        self._primed.wait(10)

    def stop_window(self) -> float | None:
        """Seconds of backend CPU in the window, None when the backends could not be read."""
        self._halt.set()
        self.join(10)
        if not self.readable or not self._last:
            return None
        ticks = sum(last - self._first[pid] for pid, last in self._last.items())
        return ticks / _TICKS


@dataclass
class Cost:
    """Statements and CPU seconds of one measured window."""

    statements: int
    process_cpu: float  # this process, every thread
    children_cpu: float  # worker processes started and waited for inside the window
    backend_cpu: float | None

    def per_job(self, jobs: int, *, statements: bool = True) -> str:
        if jobs <= 0:
            return ""
        worker = (self.process_cpu + self.children_cpu) / jobs * 1000
        server = "n/a" if self.backend_cpu is None else f"{self.backend_cpu / jobs * 1000:.3f}"
        counted = f"{self.statements / jobs:.4f} stmt, " if statements else ""
        return f"{counted}CPU ms: python {worker:.3f} + postgres {server}"


class Window:
    """``with Window(connect) as window: ...`` then ``window.cost``."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self.connect = connect
        self.cost: Cost | None = None

    def __enter__(self) -> Window:
        self._sampler = BackendCpu(self.connect)
        self._sampler.start_window()
        self._statements = COUNTER.count
        self._cpu = time.process_time()
        self._children = _children_cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cost = Cost(
            statements=COUNTER.count - self._statements,
            process_cpu=time.process_time() - self._cpu,
            children_cpu=_children_cpu() - self._children,
            backend_cpu=self._sampler.stop_window(),
        )


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
