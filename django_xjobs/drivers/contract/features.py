"""What a driver can do, asked as flags on one frozen value, as Django asks a connection's
``features``: a caller reads a flag, never a missing store or the driver's name."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DriverFeatures:
    """A driver's answers to the capability questions its callers ask (``driver.features``)."""

    #: can it hold fleet-wide concurrency slots (``job(concurrency=N)``, SPEC WORK-02)? Without
    #: them a capped job refuses to start (SE-24, check ``django_xjobs.E004``)
    supports_fleet_slots: bool = True
    #: does it keep the backfill ledger? Without it a pass runs with no bookkeeping (SPEC BF-07)
    supports_backfill_ledger: bool = True
    #: can a child process the worker starts reach these same jobs (to run a suspect alone,
    #: SPEC LEASE-19)?
    supports_child_runs: bool = False
