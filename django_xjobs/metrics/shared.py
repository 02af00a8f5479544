"""One metrics endpoint for every child of ``xjobs_worker --processes N --metrics-port P``
(issue 30), the way prometheus_client's multiprocess mode does it: each child writes its
in-process counters, gauges and histograms to a file of its own in a directory the supervisor
made (``XJOBS_METRICS_DIR``), once a second and when it exits; the supervisor serves the port
and adds the files up at scrape time. A child that was replaced keeps its file, so a counter
never goes back down; its gauges stop counting once its process is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

from .. import metrics

ENV = "XJOBS_METRICS_DIR"
_EVERY = 1.0

#: a counter's name and its labels, as ``metrics`` keys it
CounterKey = tuple[str, tuple[tuple[str, str], ...]]


class Snapshot(TypedDict):
    """A process's file: its pid and its in-process series (a counter as ``[name, labels,
    value]``, labels as ``[key, value]`` pairs: JSON has no tuples)."""

    pid: int
    counters: list[tuple[str, list[list[str]], float]]
    gauges: dict[str, float]
    histograms: dict[str, dict[str, list[float]]]


def dump() -> Snapshot:
    """This process's metrics as JSON."""
    with metrics._lock:
        return {
            "pid": os.getpid(),
            "counters": [
                (name, list(map(list, labels)), v)
                for (name, labels), v in metrics._counters.items()
            ],
            "gauges": dict(metrics._gauges),
            "histograms": {n: dict(q) for n, q in metrics._histograms.items()},
        }


def write(directory: Path) -> None:
    """Replace this process's file in ``directory`` (atomically: a scrape never reads half)."""
    target = directory / f"{os.getpid()}.json"
    partial = directory / f".{os.getpid()}.json.tmp"
    partial.write_text(json.dumps(dump()))
    os.replace(partial, target)


class Publisher(threading.Thread):
    """A child's writer: its file every second, and once more when stopped."""

    def __init__(self, directory: Path) -> None:
        super().__init__(name="xjobs-metrics-publisher", daemon=True)
        self.directory = directory
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(_EVERY):
            self._write()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)
        self._write()

    def _write(self) -> None:
        # the supervisor's directory gone means nothing is left to serve these to
        with contextlib.suppress(OSError):
            write(self.directory)


def publisher() -> Publisher | None:
    """A started publisher when this process is a child of a supervisor that serves metrics."""
    directory = os.environ.get(ENV)
    if not directory:
        return None
    started = Publisher(Path(directory))
    started.start()
    return started


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _files(directory: Path) -> Iterator[Snapshot]:
    for path in sorted(directory.glob("*.json")):
        try:
            yield json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # replaced between the listing and the read: the next scrape has it


class SharedCollector(metrics.XJobsCollector):
    """The database's series, read by the supervisor, and every child's own, added up."""

    def __init__(self, directory: Path) -> None:
        super().__init__(close_connections=True)
        self.directory = directory

    def local(
        self,
    ) -> tuple[dict[CounterKey, float], dict[str, float], dict[str, dict[str, list[float]]]]:
        counters: dict[CounterKey, float] = {}
        gauges: dict[str, float] = {}
        histograms: dict[str, dict[str, list[float]]] = {}
        for data in _files(self.directory):
            for name, labels, value in data["counters"]:
                key = (name, tuple((k, v) for k, v in labels))
                counters[key] = counters.get(key, 0.0) + value
            if _alive(int(data["pid"])):  # a gauge of a process that is gone is no more
                for name, value in data["gauges"].items():
                    gauges[name] = gauges.get(name, 0.0) + value
            for name, queues in data["histograms"].items():
                for queue, series in queues.items():
                    held = histograms.setdefault(name, {}).setdefault(queue, [0.0] * len(series))
                    for i, value in enumerate(series):
                        held[i] += value
        return counters, gauges, histograms
