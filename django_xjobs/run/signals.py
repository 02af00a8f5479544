"""Django signals for a run's lifecycle, sent by whatever runs jobs (a worker, ``run_until_idle``).

``sender`` is the job's handle (what ``@job`` returned), so a receiver can listen to one job::

    from django.dispatch import receiver
    from django_xjobs.run.signals import job_finished

    @receiver(job_finished, sender=send_receipt)
    def receipt_sent(sender, job, outcome, **kwargs):
        ...

- ``job_started(sender, job, context)``: in the run's thread, just before the handler is called.
- ``job_finished(sender, job, outcome, stop_reason, error, duration)``: once the run's end was
  written (or refused because the run no longer held the job: ``outcome="lease_lost"``). Sent on
  the worker's settle thread. ``outcome`` is one of ``completed``, ``retried``,
  ``dead_lettered``, ``failed``, ``suspended``, ``cancelled``, ``lease_lost``.
- ``job_lease_lost(sender, job, worker_id, reason)``: the worker found it no longer holds a running
  job's lease; the run is told to stop.

``job`` is the claimed row (``ClaimedJob``: ``id``, ``name``, ``queue``, ``attempt``, ``input``,
...). ``sender`` is ``None`` for a row whose name this process does not know. A receiver that
raises is logged (``xjobs.signal.receiver_failed``) and never fails the run or the worker.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.dispatch import Signal

from .. import log

if TYPE_CHECKING:
    from ..drivers.contract import ClaimedJob
    from .execution import Execution

job_started = Signal()
job_finished = Signal()
job_lease_lost = Signal()


def _send(signal: Signal, name: str, sender: object, **kwargs: Any) -> None:
    if not signal.has_listeners(sender):
        return
    for receiver, answer in signal.send_robust(sender, **kwargs):
        if isinstance(answer, Exception):
            log.event(
                logging.ERROR,
                "xjobs.signal.receiver_failed",
                signal=name,
                receiver=getattr(receiver, "__qualname__", repr(receiver)),
                id=kwargs["job"].id,
                error=answer,
            )


def started(handle: object, job: ClaimedJob, context: object) -> None:
    if not job_started.receivers:
        return
    _send(job_started, "job_started", handle, job=job, context=context)


def finished(execution: Execution, *, outcome: str, handle: object) -> None:
    """``execution`` has settled (or was refused, ``outcome="lease_lost"``); ``handle`` is
    what its run resolved at admission, the signal's sender."""
    if not job_finished.receivers:  # on the settler, per run: nothing to send to nobody
        return
    job = execution.job
    _send(
        job_finished,
        "job_finished",
        handle,
        job=job,
        outcome=outcome,
        stop_reason=execution.stop_reason,
        error=execution.error,
        duration=execution.duration,
    )


def lease_lost(job: ClaimedJob, worker_id: str, reason: str, *, handle: object) -> None:
    if not job_lease_lost.receivers:
        return
    _send(
        job_lease_lost,
        "job_lease_lost",
        handle,
        job=job,
        worker_id=worker_id,
        reason=reason,
    )
