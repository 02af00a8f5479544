"""Durable sleeps and event waits: ``ctx.step.sleep``, ``sleep_until`` and ``wait_for_event``.

They park the run (no process held, no attempt burned) by raising ``StepSuspension``, and a
later pass completes them by their record. Times are on the store's clock, so an event's
``published_at`` and a wait's ``started_at`` are compared on one clock even when the publisher
and the worker run on two machines (issue 11).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, cast

from .. import conf, crypt, log
from ..drivers.contract import EventRecord, StepRecord
from ..durations import Duration, format_seconds, parse_duration
from ..errors import InvariantError, JobTimeoutError, StepSuspension
from ..text import check_name
from .record import StepRecorder, _opened, _seconds

SCALARS = (str, int, float, bool, type(None))


class Waits(StepRecorder):
    """The steps that park the run until a time or an event: part of ``Steps``."""

    # --- sleep ------------------------------------------------------------------------------

    def sleep(self, name: str | Duration, duration: Duration | None = None) -> None:
        """Park the run for ``duration`` (``sleep("cool-off", "1h")``, or ``sleep("1h")``).

        The one-argument form is named ``sleep:<duration>``, numbered ``#2``, ``#3``... when
        repeated, so a loop of sleeps needs no names (SPEC STEP-09). No worker waits: the run is
        parked and claimed again when it is due::

            ctx.step.run("welcome", lambda: send_welcome(user_id))
            ctx.step.sleep("a-day-later", "1d")
            ctx.step.run("tips", lambda: send_tips(user_id))
        """
        if duration is None:
            duration, label = name, f"sleep:{name}"
            self._sleeps[label] += 1
            if self._sleeps[label] > 1:
                label = f"{label}#{self._sleeps[label]}"
        else:
            label = cast(str, name)  # given a duration, name is the name: _park refuses a non-str
        seconds = parse_duration(duration, field=f"sleep {label!r}")
        self._park(label, lambda now: now + timedelta(seconds=seconds))

    def sleep_until(self, name: str, when: datetime) -> None:
        """Park the run until ``when`` (an aware datetime); at once if it has passed::

            ctx.step.sleep_until("at-renewal", subscription.renews_at - timedelta(days=3))

        Like ``sleep``, no attempt is spent and no worker waits.
        """
        if not isinstance(when, datetime) or when.tzinfo is None:
            raise InvariantError(
                f"sleep_until {name!r}: {when!r} must be an aware datetime",
                hint="use django.utils.timezone.now() + timedelta(...)",
            )
        self._park(name, lambda now: when)

    def _park(self, name: str, wake: Callable[[datetime], datetime]) -> None:
        self._claim_name(name)
        record = self._records.get(name)
        if record is not None and record.status == "completed":
            self._replayed.append(name)
            return
        now = self.store.now()
        if record is None:
            wake_at = wake(now)
            if wake_at <= now:
                self._write(self._sleep_record(name, now, wake_at, completed=True))
                return
            self._write(self._sleep_record(name, now, wake_at))  # SPEC STEP-07
            raise StepSuspension(name, wake_at, "sleep", _seconds(wake_at - now))
        wake_at = record.wake_at or now
        if wake_at > now:  # SPEC STEP-08: nothing written
            raise StepSuspension(name, wake_at, "sleep", _seconds(wake_at - now))
        self._write(self._sleep_record(name, now, wake_at, completed=True))

    def _sleep_record(
        self, name: str, now: datetime, wake_at: datetime, completed: bool = False
    ) -> StepRecord:
        return StepRecord(
            run_id=self.job.run_id,
            name=name,
            status="completed" if completed else "sleeping",
            started_at=now,  # a first write only: the upsert keeps the first start
            completed_at=now if completed else None,
            wake_at=wake_at,
            position=self._position,
        )

    # --- events -----------------------------------------------------------------------------

    def wait_for_event(
        self,
        name: str,
        event: str,
        *,
        match: Mapping[str, object] | None = None,
        timeout: Duration = "24h",
        required: bool = False,
        correlation_key: str | None = None,
        any_tenant: bool = False,
    ) -> Any:
        """Park until an event named ``event`` (whose payload has ``match``'s fields) is
        published, and return its payload; ``None`` at the timeout, or ``JobTimeoutError``
        when ``required`` (SPEC STEP-11..14, EVT-02/03). Only events published for this run's
        tenant match (``publish_event(..., tenant_id=...)``; a run without a tenant matches
        events without one); ``any_tenant=True`` matches an event of any tenant. The run is
        parked meanwhile::

            shipped = ctx.step.wait_for_event(
                "shipped", "order.shipped", match={"order_id": order_id}, timeout="7d"
            )
            if shipped is None:
                ...  # seven days and no shipment

        ``publish_event("order.shipped", {"order_id": 7, "carrier": "ups"})`` wakes it.
        """
        if not isinstance(event, str) or not event:
            raise InvariantError(
                f"wait_for_event {name!r}: event={event!r} must be a non-empty string"
            )
        _check_match(name, match)
        if correlation_key is not None and not isinstance(correlation_key, str):
            raise InvariantError(f"wait_for_event {name!r}: correlation_key must be a string")
        check_name(event, f"wait_for_event {name!r}: event")
        check_name(correlation_key, f"wait_for_event {name!r}: correlation_key")
        seconds = parse_duration(timeout, field=f"wait_for_event {name!r} timeout")
        self._claim_name(name)
        record = self._records.get(name)
        if record is not None and record.status == "completed":
            self._replayed.append(name)
            return _opened(record.output)  # the event's data, sealed under ENCRYPTION_KEYS
        now = self.store.now()  # SPEC EVT-02/03: the clock the event's published_at is on
        started = record.started_at if record and record.started_at else now
        deadline = started + timedelta(seconds=seconds)
        hit = self.events.find(
            event,
            after=started,
            correlation_key=correlation_key,
            match=match,
            tenant_id=self.job.tenant_id,
            any_tenant=bool(any_tenant),
        )
        if hit is not None and record is not None:
            # a parked waiter resumed: publish to received, on the one clock (SPEC EVT-16); a
            # first look that finds its event parked nobody and is not a wake-up to measure
            self.received((now - hit.published_at).total_seconds())
        if hit is not None or now >= deadline:
            if hit is None and required:
                raise JobTimeoutError(
                    f"no {event!r} event arrived within {format_seconds(seconds)} (step {name!r})",
                    hint="publish_event(...) the event, or raise the step's timeout",
                )
            if hit is None:
                log.event(
                    logging.WARNING,
                    "xjobs.step.wait_timeout",
                    job=self.job.name,
                    step=name,
                    event=event,
                )
            return self._waited(name, started, now, event, correlation_key, hit)
        wake_at = min(deadline, now + timedelta(seconds=self.event_poll))  # SPEC STEP-12/14
        # what it waits for, kept on the waiting record for `why` (issue 42): wake_at is only the
        # next look, the deadline is the timeout's
        waits = {"match": match, "until": deadline.isoformat(), "required": bool(required)}
        self._write(
            StepRecord(
                run_id=self.job.run_id,
                name=name,
                status="waiting",
                started_at=started,
                output=waits,
                wake_at=wake_at,
                event=event,
                correlation_key=correlation_key,
                position=self._position,
                match=match,  # SPEC EVT-06: what a publish releases the run by
                any_tenant=bool(any_tenant),
            )
        )
        if match and conf.get().encryption is not None:
            # the park cannot look inside an encrypted event (jobs.sql's suspend): an event
            # committed since the first look, which a publish could not match to this record
            # before it was written, is looked for once more now that it is (SPEC CRYPT-11)
            late = self.events.find(
                event,
                after=started,
                correlation_key=correlation_key,
                match=match,
                tenant_id=self.job.tenant_id,
                any_tenant=bool(any_tenant),
            )
            if late is not None:
                return self._waited(name, started, now, event, correlation_key, late)
        raise StepSuspension(name, wake_at, "event", _seconds(wake_at - now))

    def _waited(
        self,
        name: str,
        started: datetime,
        now: datetime,
        event: str,
        correlation_key: str | None,
        hit: EventRecord | None,
    ) -> object:
        """Complete an event wait with the event it received (None: it timed out); its data."""
        self._write(
            StepRecord(
                run_id=self.job.run_id,
                name=name,
                status="completed",
                started_at=started,
                # the event's data is a payload: kept sealed, as its event is (CRYPT-08)
                output=None if hit is None else crypt.seal_value(hit.payload),
                completed_at=now,
                event=event,
                correlation_key=correlation_key,
                position=self._position,
            )
        )
        return None if hit is None else hit.payload


def _check_match(name: str, match: object) -> None:
    if match is None:
        return
    if not isinstance(match, dict) or not all(isinstance(k, str) for k in match):
        raise InvariantError(
            f"wait_for_event {name!r}: match={match!r} must be a dict of payload fields",
            hint='e.g. match={"order_id": 42}',
        )
    for key, value in match.items():
        bad_float = isinstance(value, float) and not math.isfinite(value)
        if not isinstance(value, SCALARS) or bad_float:
            raise InvariantError(
                f"wait_for_event {name!r}: match[{key!r}]={value!r} is not a plain value",
                hint="match compares top-level fields with str, number, bool or None values",
            )
