"""What the fleet and the limits hold a job by: a paused or capped queue, a job's or a key's
concurrency, a rate budget, a paused key, the workers' own caps, a suspect's
isolation, no worker on its queue, a name this process does not register."""

from __future__ import annotations

from datetime import datetime, timedelta

from ... import conf
from ...declarations import registry
from ...drivers.contract import JobDriver, JobSnapshot, Standing, WorkerSnapshot
from ...durations import format_span, format_time
from ...limits.keys import SEPARATOR, JobLimits, shown
from ...run.handle import Runnable
from ...states import WAITING_STATES
from .causes import Reason, because
from .versions import newer_reasons


def fleet_reasons(
    driver: JobDriver, row: JobSnapshot, now: datetime, standing: Standing
) -> list[Reason]:
    handle = registry.get_job(row.name)
    declared = registry.jobs.get(row.name)  # a task declares no limits
    limits = None if declared is None else declared.limits
    alive = [w for w in driver.reads().workers() if w.alive]
    watching = [w for w in alive if row.queue in w.queues]
    return [
        *_queue(driver, row, standing),
        *_job_paused(driver, row, standing),
        *_job_slots(driver, row, handle, limits),
        *_key(row, limits, standing, now),
        *_worker_caps(row, watching, standing),
        *_suspect(row),
        *_no_worker(row, alive, watching),
        *_unregistered(row, handle),
        *newer_reasons(row, handle),
    ]


def pause_reasons(driver: JobDriver, row: JobSnapshot, standing: Standing) -> list[Reason]:
    """Only the operators' pauses that hold the row: its queue's and its job's or key's (a
    lapsed run of a paused job waits for the pause to be lifted, SPEC PAUSE-10)."""
    paused = [r for r in _queue(driver, row, standing) if r.code == "queue_paused"]
    return paused + _job_paused(driver, row, standing)


def _queue(driver: JobDriver, row: JobSnapshot, standing: Standing) -> list[Reason]:
    control = next((c for c in driver.limits().queue_controls() if c.queue == row.queue), None)
    if control is None:
        return []
    reasons = []
    if control.paused:
        by = f" by {control.paused_by}" if control.paused_by else ""
        since = f" since {format_time(control.paused_at)}" if control.paused_at else ""
        ends = control.paused_until
        until = (  # SPEC PAUSE-02: a pause with an end says when it ends by itself
            f"until {format_time(ends)}: no worker claims from it until then (or python "
            f"manage.py xjobs resume {row.queue})"
            if ends is not None
            else f": no worker claims from it until python manage.py xjobs resume {row.queue}"
        )
        reasons.append(
            because(
                "queue_paused",
                f"queue {row.queue!r} is paused{by}{since}{' ' if ends else ''}{until}",
                queue=row.queue,
                paused_at=control.paused_at,
                by=control.paused_by,
                until=ends,
            )
        )
    if control.limit is not None and standing.queue_running >= control.limit:
        reasons.append(
            because(
                "queue_at_cap",
                f"queue {row.queue!r} is at its cap: {standing.queue_running} of "
                f"{control.limit} runs at once across the fleet (xjobs limit {row.queue} N "
                "changes it)",
                queue=row.queue,
                limit=control.limit,
                running=standing.queue_running,
            )
        )
    return reasons


def _job_paused(driver: JobDriver, row: JobSnapshot, standing: Standing) -> list[Reason]:
    """An operator's pause of the job's name or of its limit key (``pause_jobs``; SPEC
    PAUSE-07): who, since when, and until when or until resumed."""
    reasons = []
    for pause in driver.limits().job_pauses():
        if pause.target not in (row.name, standing.key):
            continue
        what = row.name if pause.key is None else f"its limit key {shown(pause.target)}"
        by = f" by {pause.paused_by}" if pause.paused_by else ""
        resume = f"python manage.py xjobs resume-jobs {row.name}" + (
            "" if pause.key is None else f" --key {pause.key}"
        )
        ends = pause.paused_until
        until = (
            f" until {format_time(ends)}: no worker starts it until then (or {resume})"
            if ends is not None
            else f": no worker starts it until {resume}"
        )
        reasons.append(
            because(
                "job_paused",
                f"{what} is paused{by} since {format_time(pause.paused_at)}{until}",
                job=pause.name,
                key=pause.key,
                paused_at=pause.paused_at,
                by=pause.paused_by,
                until=ends,
            )
        )
    return reasons


def _job_slots(
    driver: JobDriver, row: JobSnapshot, handle: Runnable | None, limits: JobLimits | None
) -> list[Reason]:
    """``job(concurrency=N)`` without a limit key: N fleet slots per job name (SPEC SLOT-02)."""
    per_key = limits is not None and limits.key is not None
    fleet = driver.features.supports_fleet_slots
    if handle is None or not handle.concurrency or not fleet or per_key:
        return []
    held = driver.limits().held_slots(f"job:{row.name}")  # SPEC SLOT-02: the fleet-wide key
    if held < handle.concurrency:
        return []
    running = driver.reads().list_jobs(
        name=row.name, state="running", limit=min(handle.concurrency, 10)
    )
    holders = [{"id": str(r.id), "worker": r.claimed_by} for r in running]
    who = ", ".join(f"{r.id} on {r.claimed_by}" for r in running) or "runs whose slots lapse"
    return [
        because(
            "job_at_limit",
            f"{row.name} is at its concurrency limit ({held} of {handle.concurrency} runs at "
            f"once): held by {who}",
            limit=handle.concurrency,
            held=held,
            holders=holders,
        )
    ]


def _key(
    row: JobSnapshot, limits: JobLimits | None, standing: Standing, now: datetime
) -> list[Reason]:
    """A declared limit key (``limit_key``, ``rate_limit``): its runs at once, its starts in its
    window, a pause a ``RateLimited`` put on it (SPEC LIMIT-10..16)."""
    key = standing.key
    if key is None:
        return []
    name = shown(key)
    reasons: list[Reason] = []
    if limits is not None and key.partition(SEPARATOR)[0] != row.name:
        limits = None  # a fair-share group's key: no limit of the job's own
    if limits is not None and limits.concurrency and standing.key_running >= limits.concurrency:
        holders = [{"id": str(i), "worker": w} for i, w in standing.key_holders]
        who = ", ".join(f"{i} on {w}" for i, w in standing.key_holders)
        reasons.append(
            because(
                "key_at_limit",
                f"its limit key {name} is at its concurrency limit ({standing.key_running} of "
                f"{limits.concurrency} runs at once): held by {who}",
                key=name,
                limit=limits.concurrency,
                running=standing.key_running,
                holders=holders,
            )
        )
    rate = limits.rate if limits is not None else None
    if rate is not None:
        window = [at for at in standing.key_starts if (now - at).total_seconds() < rate.window]
        if len(window) >= rate.limit:
            # the slot opens when enough of the oldest starts leave the window
            opens = sorted(window)[len(window) - rate.limit] + timedelta(seconds=rate.window)
            left = round((opens - now).total_seconds(), 1)
            reasons.append(
                because(
                    "rate_limited",
                    f"its limit key {name} spent its rate budget ({rate.limit} starts per "
                    f"{format_span(rate.window)}): {len(window)} started in the window; the "
                    f"next slot opens at {format_time(opens)} (in {format_span(left)})",
                    key=name,
                    rate=str(rate),
                    starts_in_window=len(window),
                    next_slot_at=opens,
                    in_seconds=left,
                )
            )
    paused = standing.key_paused_until
    if paused is not None:
        reasons.append(
            because(
                "key_paused",
                f"its limit key {name} is paused until {format_time(paused)} (in "
                f"{format_span((paused - now).total_seconds())}): a run raised "
                "RateLimited(retry_after=...), or an operator paused it (pause_jobs)",
                key=name,
                until=paused,
            )
        )
    return reasons


def _worker_caps(
    row: JobSnapshot, watching: list[WorkerSnapshot], standing: Standing
) -> list[Reason]:
    """``XJOBS["LIMITS"]``: each worker's own caps on its runs (SPEC LIMIT-01..06). Held only when
    every worker that watches the queue is at one of them. A tenant's rate per process is counted
    in each worker's memory, out of sight here."""
    caps = conf.get().limits
    queue_cap = caps.queue_cap(row.queue)
    if row.state not in WAITING_STATES or not watching:
        return []
    if caps.global_ is None and queue_cap is None and caps.per_tenant is None:
        return []
    loads = {load.worker: load for load in standing.loads}
    full = []
    for worker in watching:
        load = loads.get(worker.id)
        if load is None:
            return []
        hit = []
        if caps.global_ is not None and load.running >= caps.global_:
            hit.append(f"global {load.running}/{caps.global_}")
        if queue_cap is not None and load.queue_running >= queue_cap:
            hit.append(f"per_queue {load.queue_running}/{queue_cap}")
        if caps.per_tenant is not None and load.tenant_running >= caps.per_tenant:
            hit.append(f"per_tenant {load.tenant_running}/{caps.per_tenant}")
        if not hit:
            return []
        full.append({"worker": worker.id, "caps": hit})
    each = "; ".join(f"{w['worker']} ({', '.join(w['caps'])})" for w in full)
    return [
        because(
            "worker_limits",
            f"every worker watching queue {row.queue!r} is at one of its XJOBS['LIMITS'] caps: "
            f"{each}",
            queue=row.queue,
            tenant_id=row.tenant_id,
            workers=full,
        )
    ]


def _suspect(row: JobSnapshot) -> list[Reason]:
    """SPEC LEASE-19: its last run died with its worker, or died alone, so the worker that
    claims it next runs it alone in a child process. That holds nothing back (the worker goes on
    claiming beside it), but it is why the job runs apart, and how near it is to its bound."""
    if row.lapsed_holder is None and not row.lease_expiries:
        return []
    bound = conf.get().max_lease_expiries
    if row.lapsed_holder is not None:
        cause = f"its last run died with worker {row.lapsed_holder} (not counted as its crash)"
    else:
        cause = f"{row.lease_expiries} of its runs in a row died alone ({bound} dead-letter it)"
    return [
        because(
            "suspect",
            f"{cause}: the worker that claims it runs it alone in a child process, beside its "
            "other runs",
            died_with=row.lapsed_holder,
            crashes=row.lease_expiries,
            max_crashes=bound,
            isolated=True,
        )
    ]


def _no_worker(
    row: JobSnapshot, alive: list[WorkerSnapshot], watching: list[WorkerSnapshot]
) -> list[Reason]:
    if watching:
        return []
    return [
        because(
            "no_worker",
            f"no live worker watches queue {row.queue!r}"
            + (f" ({len(alive)} live on other queues)" if alive else " (no live worker at all)"),
            queue=row.queue,
            live_workers=len(alive),
        )
    ]


def _unregistered(row: JobSnapshot, handle: Runnable | None) -> list[Reason]:
    if handle is not None or row.state == "suspended":
        return []
    return [
        because(
            "not_registered_here",
            f"this process registers no job named {row.name!r}; a worker that does not either "
            "parks it as unknown",
            name=row.name,
        )
    ]
