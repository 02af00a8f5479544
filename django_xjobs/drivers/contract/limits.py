"""What holds a claim back: the queue and key controls and the fleet slots (``LimitStore``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from .records import JobPause, KeyUse, QueueState


class LimitStore(Protocol):
    """What holds a claim back, fleet-wide: the operators' queue controls, the limit keys'
    pauses and state, and the fleet concurrency slots."""

    # fleet-wide queue controls: read by workers once a poll and when told, never per claim
    def pause_queue(self, queue: str, by: str | None, until: datetime | None = None) -> QueueState:
        """Paused from now on, for every worker, until resumed or, given ``until``, until then
        (the pause then ends by itself: a read after it finds the queue running, SPEC PAUSE-01);
        pausing a paused queue keeps its first pause and takes the new ``until``."""

    def resume_queue(self, queue: str) -> QueueState:
        """No longer paused; resuming a queue that is not paused changes nothing."""

    def queue_controls(self) -> list[QueueState]:
        """Every queue an operator ever set, by name; reads only."""

    def paused_queues(self) -> frozenset[str]:
        """The names of the paused queues; reads only."""

    def set_queue_limit(self, queue: str, concurrency: int | None) -> QueueState:
        """At most ``concurrency`` runs of ``queue`` at once, fleet-wide (None: no cap)."""

    # operators' pauses of a job or a key (``pause_jobs``): read by workers once a poll and
    # when told, and handed to their claims (``RunStore.claim(paused=)``), never read in one
    def pause_job(
        self, name: str, key: str | None, by: str | None, until: datetime | None = None
    ) -> JobPause:
        """No run of job ``name`` (of its rendered limit key ``key``, when given) is taken by a
        claim told of it, from now until resumed or, given ``until``, until then (SPEC PAUSE-04,
        PAUSE-05); pausing a paused one keeps its first pause and takes the new ``until``. A
        key's pause with an end is ``pause_key``'s, in the key's own row."""

    def resume_job(self, name: str, key: str | None) -> bool:
        """The pause of job ``name`` (or of its key ``key``, and the key's ``pause_key`` pause
        with it) lifted; whether one was in force."""

    def job_pauses(self) -> list[JobPause]:
        """The pauses of jobs and keys in force, by target (one past its end is over); reads
        only."""

    def pause_key(self, key: str, delay: float) -> None:
        """No run of limit key ``key`` is claimed for ``delay`` seconds (``RateLimited``)."""

    def key_usage(self, limit: int = 500) -> list[KeyUse]:
        """(key, paused until, running, recorded starts) per limit key used within a day."""

    def prune_limit_keys(self, windows: Mapping[str, float], idle_for: float) -> int:
        """Delete the state of each limit key with no run waiting or running, no pause in
        force, no start inside its job's window (``windows``: rate window by job name) and
        untouched for ``idle_for`` seconds; how many went. A key a claim holds is left for the
        next prune."""

    # fleet concurrency slots in ``x_job_leases`` (SPEC SLOT-03/06), read when
    # ``features.supports_fleet_slots`` (SPEC WORK-02): ``limit`` slots per key, each held by one
    # holder until it is released or its ``expires_at`` passes
    def acquire_slot(self, key: str, limit: int, ttl: float, holder: str) -> int | None:
        """The lowest free slot in ``0..limit-1`` (no live row), now held; None when all are."""

    def renew_slot(self, key: str, slot: int, ttl: float, holder: str) -> bool:
        """Extend the slot, only for its holder and only while it has not expired (SE-08)."""

    def release_slot(self, key: str, slot: int, holder: str) -> bool:
        """Delete the slot's row, only the holder's own."""

    def held_slots(self, key: str) -> int:
        """Live slots of ``key`` (diagnostics)."""
