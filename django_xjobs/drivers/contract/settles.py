"""The settle values: how a claimed run ends, one driver call each (STYLE: one settle)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from ...history import Failure
from ...text import storable
from ..values import quick_init

FinalState = Literal["dead", "failed"]


# Every one is fenced on state='running' and its lease token: a row that moved on (lapsed,
# re-claimed, cancelled) refuses it and the call answers False (SPEC STATE-01, DESIGN Q-01).


@quick_init
@dataclass(frozen=True)
class Complete:
    """Done, with its JSON ``result`` text (or ``None``); ``RunStore.complete`` takes many at once."""

    job_id: UUID
    lease_token: UUID
    result_json: str | None = None


def _storable_error(value: Any) -> None:
    """A settle's ``error`` as it can be stored: a NUL, a lone surrogate or a megabyte of
    message must not make the settle itself fail, attempt after attempt (issue 24 §3)."""
    if value.error is not None:
        object.__setattr__(value, "error", storable(value.error))


@quick_init
@dataclass(frozen=True)
class RetryAt:
    """Ready again after ``delay`` seconds (SPEC DRV-01, STATE-02). ``counts_as_attempt=False``
    gives the attempt back (floored at 0, SPEC STATE-03); ``failure`` joins the history.
    ``crashed``: the run died alone in the child that isolated it, so the row's crash count goes
    up by one instead of back to 0 (SPEC LEASE-17). ``keep_place``: a run handed back, not
    ended (an outage cut it short, SPEC LEASE-20): ready at once in its old place in the queue,
    its crash count and mark kept, as a shed keeps them."""

    job_id: UUID
    lease_token: UUID
    delay: float = 0.0
    error: str | None = None
    counts_as_attempt: bool = True
    stop_reason: str | None = None
    failure: Failure | None = None
    crashed: bool = False
    keep_place: bool = False

    def __post_init__(self) -> None:
        _storable_error(self)


@quick_init
@dataclass(frozen=True)
class SuspendUntil:
    """Parked (``suspended``) for ``delay`` seconds without spending an attempt (SPEC STEP-10).
    ``snoozed``: ``ctx.snooze`` put it back instead, waiting (``ready`` once due) with one more
    snooze counted; ``failure`` joins the history (a snooze is recorded there, not failed)."""

    job_id: UUID
    lease_token: UUID
    delay: float = 0.0
    error: str | None = None
    snoozed: bool = False
    failure: Failure | None = None
    #: a call step's live child jobs: the run is named among their dependants and falls due
    #: when the settle of the last of them ends it (issue 32, SPEC CHILD-07)
    children: tuple[UUID, ...] | None = None
    #: a worker of a newer version parks a run of an older one (``old_runs="park"``, issue 44):
    #: its own claims pass the run by, a worker of the run's version takes it (SPEC VER-08)
    parked: bool = False

    def __post_init__(self) -> None:
        _storable_error(self)


@dataclass(frozen=True)
class Shed:
    """Handed back unrun (a full slot or limit, SPEC WORK-04/07/08): ready after ``delay``, no
    attempt spent, no error, and the row keeps its crash count. ``reason`` is for the log.
    ``keep_place``: ready at once, in its old place in the queue (its ``run_at`` kept)."""

    job_id: UUID
    lease_token: UUID
    delay: float = 0.0
    reason: str = ""
    keep_place: bool = False


@quick_init
@dataclass(frozen=True)
class Finish:
    """Ended for good in ``state`` (dead / failed) with ``stop_reason``; ``failure`` joins the
    history."""

    job_id: UUID
    lease_token: UUID
    state: FinalState
    stop_reason: str | None = None
    error: str | None = None
    failure: Failure | None = None

    def __post_init__(self) -> None:
        _storable_error(self)


#: The closed set of ways a claimed run is settled.
Settle = Complete | RetryAt | SuspendUntil | Shed | Finish
