"""How a run is told to stop: ``JobInterrupt``'s kinds. None is an ``Exception``, so a
handler's ``except Exception`` cannot swallow a cancellation, a lost lease or a step's park."""

from __future__ import annotations

from typing import Any

from .base import JobInterrupt


class JobAbortedError(JobInterrupt):
    """The run was aborted; nothing more it writes will land."""

    code = "X_ABORTED"


class LeaseLostError(JobInterrupt):
    """The run no longer holds its job: the lease lapsed or was taken."""

    code = "X_JOB_LEASE_LOST"


class SlotLostError(JobInterrupt):
    """The run's fleet concurrency slot is no longer its own."""

    code = "X_JOB_SLOT_LOST"


class JobCancelledError(JobInterrupt):
    """The job was cancelled while it ran."""

    code = "X_JOB_CANCELLED"


class StepSuspension(JobInterrupt):
    """Internal: a step parks the run until ``resume_at`` (a sleep or an event wait).

    It unwinds the handler like a cancellation (an ``except Exception`` must not stop it) and
    the executor turns it into a SuspendUntil settle that burns no attempt (SPEC STEP-10).
    """

    code = "X_STEP_SUSPENDED"

    def __init__(
        self,
        step: str,
        resume_at: Any,
        reason: str,
        resume_in: float = 0.0,
        children: tuple[Any, ...] | None = None,
    ) -> None:
        super().__init__(f"step {step!r} parks the run until {resume_at} ({reason})")
        self.step, self.resume_at, self.reason = step, resume_at, reason
        #: seconds from now to ``resume_at``, both on the step store's clock (issue 11)
        self.resume_in = resume_in
        #: the live child jobs a call step waits for: the last to end wakes the run (issue 32)
        self.children = children


class JobSnooze(JobInterrupt):
    """Internal: ``ctx.snooze`` puts the run back for ``seconds`` without spending an attempt.

    It unwinds the handler like a step suspension (an ``except Exception`` must not stop it),
    and the executor settles it as a snooze (issue 29).
    """

    code = "X_JOB_SNOOZED"

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the run snoozes for {seconds:g}s")
        self.seconds = seconds
