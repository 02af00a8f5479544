"""A run that failed because its database connection failed: retried without spending an
attempt, with backoff, within a budget of ``XJOBS["OUTAGE_RETRIES"]`` per job and process.

The attempt budget is for the job's own failures; an outage (refused connections, too many
clients, an administrator shutdown) would otherwise dead-letter healthy jobs. The budget is
kept in this process, so it is bounded per worker process, not fleet-wide.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from .. import conf
from ..drivers import failures

BASE = 1.0
CAP = 30.0
_JOBS_KEPT = 10_000
_lock = threading.Lock()
_spent: OrderedDict[Any, int] = OrderedDict()


def retry_in(job_id: object, error: BaseException) -> tuple[float, int] | None:
    """``(delay, retries left)`` when ``error`` is a connection failure and ``job_id`` has
    budget left (one is spent); None when the attempt must be spent as usual."""
    if not failures.connection_failed(error):
        return None
    budget = conf.get().outage_retries
    with _lock:
        spent = _spent.pop(job_id, 0)
        _spent[job_id] = min(spent + 1, budget)
        while len(_spent) > _JOBS_KEPT:
            _spent.popitem(last=False)
    if spent >= budget:
        return None
    return min(CAP, BASE * 2**spent), budget - spent - 1


def forget(job_id: object) -> None:
    """The job's run ended some other way: its next outage starts a fresh budget."""
    if job_id not in _spent:  # almost every run: no outage charged it, so no lock to take
        return
    with _lock:
        _spent.pop(job_id, None)
