"""The events' series (issue 43): each committed publish counted by event name
(``xjobs_events_published_total{event}``), and how long a published event took to reach the
waiting step that received it (``xjobs_event_wait_seconds{queue}``).

An event name is chosen in code, like a job name, so the ``event`` label has a few values. A name
built from data (``f"order.{order_id}.shipped"``) would make a series per order, so one process
counts at most ``MAX_EVENT_LABELS`` names under their own label and every name after them under
``OTHER``, saying so once in the log (``xjobs.metrics.event_labels_full``).
"""

from __future__ import annotations

import logging
import threading

from .. import log
from . import inc, observe

PUBLISHED = "xjobs_events_published_total"
WAIT = "xjobs_event_wait_seconds"

#: distinct event names one process counts under their own ``event`` label
MAX_EVENT_LABELS = 200
#: the label every event name past ``MAX_EVENT_LABELS`` is counted under
OTHER = "_other"

_labels: set[str] = set()
_warned = [False]  # the full label set is logged once per process
_lock = threading.Lock()


def published(event: str) -> None:
    """Count one committed publish of ``event`` (SPEC EVT-16)."""
    inc(PUBLISHED, event=label(event))


def received(queue: str, seconds: float) -> None:
    """Observe the ``seconds`` from an event's publication to the waiting step of a run of
    ``queue`` receiving it, both on the store's clock (SPEC EVT-16)."""
    observe(WAIT, max(0.0, seconds), queue=queue)


def label(event: str) -> str:
    """``event`` as the ``event`` label reads it: itself among the first ``MAX_EVENT_LABELS``
    names this process counted, else ``OTHER``."""
    with _lock:
        if event in _labels or len(_labels) < MAX_EVENT_LABELS:
            _labels.add(event)
            return event
        first = not _warned[0]
        _warned[0] = True
    if first:
        log.event(
            logging.WARNING,
            "xjobs.metrics.event_labels_full",
            limit=MAX_EVENT_LABELS,
            event=event,
        )
    return OTHER


def forget_labels() -> None:
    """Forget which names were counted under their own label (for tests)."""
    with _lock:
        _labels.clear()
        _warned[0] = False
