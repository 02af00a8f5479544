"""A job's states, grouped the ways the rest of the package asks about them (one owner each).

``models.JobState`` names every state for the ORM; these tuples say which are live (hold the
idempotency key, may still run) and which are finished (never run again by themselves).
"""

from __future__ import annotations

from datetime import datetime

#: queued, running or parked: the row holds its idempotency key (the live-key unique index)
LIVE_STATES = ("ready", "delayed", "running", "suspended")
#: the run is over; only an operator's retry starts it again
FINISHED_STATES = ("done", "dead", "failed", "cancelled")
#: every state a job row may hold; a row read with another is refused, never cast (SPEC DB-05)
JOB_STATES = LIVE_STATES + FINISHED_STATES

#: the states a row waits to be claimed in; which of the two it shows depends on its run_at
WAITING_STATES = ("ready", "delayed")


def shown_state(state: str, run_at: datetime | None, now: datetime) -> str:
    """The one state every surface shows (the jobs list and its filter, ``xjobs ls``, the queues
    page, ``xjobs queues``, ``inspect_queues``): a waiting row is ``ready`` once due and
    ``delayed`` until then, whichever of the two it is stored as (DESIGN Q-05). A retry's
    backoff is stored ``ready`` with a later run_at: it is shown delayed, as it is counted."""
    if state not in WAITING_STATES or run_at is None:
        return state
    return "delayed" if run_at > now else "ready"


def shown_attempt(state: str, attempt: int, started: bool = True) -> int:
    """The attempt a screen names. A parked run (``suspended``: a sleep, an event wait, an
    unknown name) gives its attempt back, as it spends none (SPEC STEP-10), so the row stores
    one less than the attempt it is in and resumes as. A job that never ran (``started``
    False: a dependant waiting for the jobs it runs after) is at attempt 0, parked or not."""
    return attempt + 1 if state == "suspended" and started else attempt


def after_dependencies(run_at: datetime | None) -> bool:
    """Whether ``run_at`` is the far future a dependant waits at until the last job it runs
    after settles (jobs.sql's enqueue_after): no time to show, "runs after its dependencies"."""
    return run_at is not None and run_at.year >= 9999
