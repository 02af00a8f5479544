"""In-process counters, named and labelled as the Prometheus series they will be exported as
(``xjobs_job_leases_lost_total{queue=...}``). Thread-safe; cheap enough for hot paths."""

from __future__ import annotations

import threading

_counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
_lock = threading.Lock()


def inc(name: str, amount: float = 1, **labels: str) -> None:
    key = (name, tuple(sorted(labels.items())))
    with _lock:
        _counters[key] = _counters.get(key, 0.0) + amount


def value(name: str, **labels: str) -> float:
    with _lock:
        return _counters.get((name, tuple(sorted(labels.items()))), 0.0)


def snapshot() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with _lock:
        return dict(_counters)
