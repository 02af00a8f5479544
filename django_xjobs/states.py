"""A job's states, grouped the ways the rest of the package asks about them (one owner each).

``models.JobState`` names every state for the ORM; these tuples say which are live (hold the
idempotency key, may still run) and which are finished (never run again by themselves).
"""

from __future__ import annotations

#: queued, running or parked: the row holds its idempotency key (the live-key unique index)
LIVE_STATES = ("ready", "delayed", "running", "suspended")
#: the run is over; only an operator's retry starts it again
FINISHED_STATES = ("done", "dead", "failed", "cancelled")
#: every state a job row may hold; a row read with another is refused, never cast (SPEC DB-05)
JOB_STATES = LIVE_STATES + FINISHED_STATES
