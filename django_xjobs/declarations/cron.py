"""``cron()``: a schedule whose occurrences enqueue jobs; validated at declaration.

(Django 6 gave the word "task" to ``django.tasks``: a background function. Here a cron is the
schedule, and the jobs it enqueues are the work.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Literal, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import croniter
from croniter.croniter import (
    CroniterBadCronError,
    CroniterBadDateError,
    CroniterBadTypeRangeError,
)

from ..errors import CronInvalidError, InvariantError
from ..text import check_label
from . import registry

#: the most missed occurrences one round of the scheduler dispatches for a cron
MAX_CATCH_UP = 1000

CatchUp = Literal["skip", "run-once", "run-all"]
_ZONES: set[str] | None = None


class CronHandle:
    """A declared cron schedule: ``fn(occurrence)`` returns ``[(job_handle, inputs), ...]``.

    ``@cron`` returns one; ``enqueue()`` fires its entries now, as an operator would::

        nightly.enqueue()
        nightly.next_occurrence(timezone.now())  # the next time the scheduler fires it
    """

    def __init__(
        self,
        fn: Callable[[datetime], object],
        *,
        name: str,
        schedule: str,
        tz: str,
        catch_up: CatchUp,
        max_catch_up: int,
        seconds: str | None = None,
    ) -> None:
        self.fn, self.name, self.schedule, self.tz = fn, name, schedule, tz
        #: the seconds field, given apart from the 5 fields (None: at second 0)
        self.seconds = seconds
        # croniter's spelling: the seconds go last, and only ever come from ``seconds=``
        self.expression = schedule if seconds is None else f"{schedule} {seconds}"
        self.zone = ZoneInfo(tz)
        self.catch_up, self.max_catch_up = catch_up, max_catch_up
        #: the ``django.tasks`` Task each occurrence enqueues, when the cron decorates one
        self.task: Any = None
        self.origin = f"{fn.__module__}.{fn.__qualname__}"
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        seconds = "" if self.seconds is None else f" seconds={self.seconds!r}"
        return f"<CronHandle {self.name} {self.schedule!r}{seconds} {self.tz}>"

    def next_occurrence(self, after: datetime) -> datetime:
        """The first occurrence strictly after ``after`` (aware), as an aware UTC datetime.

        Each matching wall-clock time happens once, at the earliest instant that exists: in a
        fall-back fold the first pass of the hour, in a spring-forward gap the same wall time
        shifted past the gap, never skipped (SPEC SCHED-16, SE-43).
        """
        # Read ``after`` as a wall time at the smaller of today's and yesterday's UTC offsets:
        # just past a spring-forward gap, the wall times inside the gap (shifted past it) are
        # still ahead of us, and starting from the later offset would skip them.
        offset = min(
            after.astimezone(self.zone).utcoffset() or timedelta(0),
            (after - timedelta(days=1)).astimezone(self.zone).utcoffset() or timedelta(0),
        )
        local = after.astimezone(timezone(offset)).replace(tzinfo=None)
        walk = croniter(self.expression, local)
        for _ in range(10_000):
            wall: datetime = walk.get_next(datetime)
            instant = wall.replace(tzinfo=self.zone, fold=0).astimezone(UTC)
            if instant > after:
                return instant
        raise InvariantError(f"cron {self.name!r}: no occurrence after {after.isoformat()}")

    def entries(self, occurrence: datetime) -> list[tuple[Any, dict[str, Any]]]:
        """What ``occurrence`` enqueues, checked: job handles with a dict of inputs each."""
        from .job import JobHandle

        produced: Any = self.fn(occurrence)  # the user's entries, checked one by one below
        if produced is None:
            return []
        entries = []
        for index, entry in enumerate(produced):
            if (
                not isinstance(entry, tuple | list)
                or len(entry) != 2
                or not (isinstance(entry[0], JobHandle) or _is_task_job(entry[0]))
                or not isinstance(entry[1], dict)
            ):
                raise InvariantError(
                    f"cron {self.name!r}: entry {index} is {entry!r}, not (job_handle, inputs)",
                    hint="return a list of (job, {inputs}) pairs, e.g. [(send_digest, {'day': ...})]",
                )
            entries.append((entry[0], entry[1]))
        return entries

    def enqueue(self) -> list[dict[str, Any]]:
        """Fire the entries now, with each job's plain idempotency key (SPEC TASK-04)."""
        now = datetime.now(UTC)
        return [
            {"job": handle.name, "result": handle.enqueue(**inputs)}
            for handle, inputs in self.entries(now)
        ]

    def describe(self) -> dict[str, Any]:
        """SPEC TASK-05: plain JSON; ``jobs`` are those its next occurrence would enqueue.
        ``seconds`` is there only when the cron has one (a manifest of minute crons is
        unchanged by it)."""
        described: dict[str, Any] = {
            "kind": "cron",
            "name": self.name,
            "schedule": self.schedule,
            "tz": self.tz,
            "catch_up": self.catch_up,
            "max_catch_up": self.max_catch_up,
            "jobs": self.job_names(),
        }
        if self.seconds is not None:
            described["seconds"] = self.seconds
        return described

    def job_names(self) -> list[str]:
        """The jobs an occurrence enqueues, in declaration order (never raises)."""
        try:
            entries = self.entries(self.next_occurrence(datetime.now(UTC)))
        except Exception:
            return []
        return list(dict.fromkeys(handle.name for handle, _ in entries))


def cron(
    schedule: str,
    *,
    tz: str,
    name: str | None = None,
    catch_up: CatchUp = "skip",
    max_catch_up: int = 10,
    seconds: str | None = None,
) -> Callable[[Callable[[datetime], object]], CronHandle]:
    """Declare a cron schedule. ``fn(occurrence)`` gets the occurrence as an aware datetime and
    returns the jobs to enqueue for it::

        @cron("0 3 * * *", tz="Europe/Paris", catch_up="skip")
        def nightly(occurrence):
            return [(send_digest, {"day": occurrence.date().isoformat()})]

    Build inputs from ``occurrence``, never from the wall clock: a catch-up run gets its own
    day's payload. ``schedule`` has the 5 fields (minute hour day month weekday); ``tz`` is
    an IANA zone. Seconds are a field of their own, ``seconds=``, never a sixth field in the
    string (readers disagree on whether it comes first or last)::

        @cron("* * * * *", seconds="*/20", tz="UTC")  # every 20 seconds

    Declare crons in an installed app's ``jobs.py``, beside the jobs they enqueue.

    Above a ``django.tasks`` task (run by ``XJobsBackend``), each occurrence enqueues the task,
    exactly once, with the occurrence as ISO 8601 text when it takes an ``occurrence``
    argument; the decorator then returns the task itself::

        @cron("0 3 * * *", tz="UTC")
        @task
        def nightly_report(occurrence=None):
            ...
    """
    if callable(schedule):
        raise CronInvalidError(
            f'@cron needs its schedule: @cron("0 3 * * *", tz=...) above {getattr(schedule, "__name__", "the function")}',
            hint='e.g. @cron("0 3 * * *", tz="UTC")',
        )

    def declare(handler: Callable[[datetime], object]) -> Any:
        task = _as_task(handler)
        if task is not None:
            # a django.tasks Task: each occurrence enqueues it; the module keeps the Task itself
            # (its workers find it there by its module path), the cron is in the registry
            label = name or task.module_path
            handle = registry.declare(
                "cron", label, lambda: _build(registry.task_resolver().cron_entries(task), label)
            )
            handle.task = task
            registry.crons.register(handle)
            return task
        label = (
            name or f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', '?')}"
        )
        handle = registry.declare("cron", label, lambda: _build(handler, label))
        registry.crons.register(handle)
        return handle

    def _build(handler: Callable[[datetime], object], label: str) -> CronHandle:
        if not callable(handler):
            raise InvariantError(
                f"@cron decorates a function, got {handler!r}", hint="put @cron(...) above a def"
            )
        # stored, looked up and printed by its name: pause, resume and xjobs crons (issue 40)
        check_label(label, "cron name")
        zone = _check_tz(tz)
        check_schedule(schedule, seconds, zone)
        if catch_up not in ("skip", "run-once", "run-all"):
            raise InvariantError(
                f"catch_up={catch_up!r} is not a policy", hint='use "skip", "run-once" or "run-all"'
            )
        if (
            isinstance(max_catch_up, bool)
            or not isinstance(max_catch_up, int)
            or not 1 <= max_catch_up <= MAX_CATCH_UP
        ):
            # each missed occurrence is enqueued in one round: the bound keeps a round finite
            raise InvariantError(
                f"max_catch_up={max_catch_up!r} must be an integer from 1 to {MAX_CATCH_UP:,}",
                hint="0 would mean the schedule never fires; past the bound, catch_up='run-once'",
            )
        return CronHandle(
            handler,
            name=label,
            schedule=schedule,
            tz=zone,
            catch_up=catch_up,
            max_catch_up=max_catch_up,
            seconds=seconds,
        )

    return declare


def _as_task(handler: object) -> Any:
    """``handler`` when it is a ``django.tasks`` Task (Django 6, or the backport), else None."""
    if not type(handler).__module__.startswith(("django.tasks", "django_tasks")):
        return None
    return registry.task_resolver().as_task(handler)


def _is_task_job(entry: object) -> bool:
    return (
        type(entry).__name__ == "TaskJob"
        and type(entry).__module__ == "django_xjobs.backends.tasks"
    )


def _check_tz(tz: object) -> str:
    global _ZONES
    if _ZONES is None:
        _ZONES = available_timezones()
    if not isinstance(tz, str) or not tz or tz not in _ZONES:
        raise InvariantError(
            f"tz={tz!r} is not an IANA time zone",
            hint='name a zone such as "Europe/Paris" or "UTC"; offsets like "+02:00" shift with '
            "no daylight-saving rule",
        )
    try:
        ZoneInfo(tz)
    except ZoneInfoNotFoundError:  # pragma: no cover - listed zones load
        raise InvariantError(f"tz={tz!r} could not be loaded") from None
    return tz


#: the five fields in order, with the numbers each takes
FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
)
SECONDS = ("seconds", 0, 59)
#: a number in a field that is a value, not a step (``*/90`` is a step of 90)
_VALUE = re.compile(r"(?<![/\d])\d+")


def check_schedule(schedule: object, seconds: object, tz: str) -> None:
    """A schedule that means one thing to every reader, each field in range, that can fire.

    Six fields are refused: croniter reads the sixth as seconds, Quartz, Spring and node's
    parsers read the first, so ``*/20 * * * * *`` would be every 20 s to one reader and 60
    runs a minute to another. Seconds are asked for by name, ``seconds=``."""
    fields = schedule.split() if isinstance(schedule, str) else []
    if len(fields) == 6:
        first = f'@cron("{" ".join(fields[1:])}", seconds="{fields[0]}", ...)'
        last = f'@cron("{" ".join(fields[:5])}", seconds="{fields[5]}", ...)'
        raise CronInvalidError(
            f"schedule {schedule!r} has 6 fields: some cron readers take the first as seconds, "
            "others the last, so it is refused",
            hint=f"give the 5 fields and the seconds apart: {first}"
            if first == last
            else f"give the 5 fields and the seconds apart: {first} for seconds first, "
            f"{last} for seconds last",
        )
    if len(fields) != 5:
        raise CronInvalidError(
            f"schedule {schedule!r} must have 5 fields (minute hour day-of-month month "
            "day-of-week)",
            hint='e.g. "0 3 * * *" for 03:00 every day; seconds go in seconds="..."',
        )
    for index, field in enumerate(FIELDS):
        alone = ["*"] * 5
        alone[index] = fields[index]
        _check_field(" ".join(alone), f"schedule {schedule!r}", field, fields[index])
    if seconds is not None:
        if not isinstance(seconds, str) or len(seconds.split()) != 1:
            raise CronInvalidError(
                f'seconds={seconds!r} must be one cron field, e.g. "*/20" or "0,30"',
                hint="the seconds field takes 0-59",
            )
        _check_field(f"* * * * * {seconds}", f"seconds={seconds!r}", SECONDS, seconds)
    expression = schedule if seconds is None else f"{schedule} {seconds}"
    try:
        walk = croniter(expression, datetime(2026, 1, 1, tzinfo=ZoneInfo(tz)))
        walk.get_next(datetime)
    except CroniterBadCronError as error:  # pragma: no cover - each field was checked alone
        raise CronInvalidError(
            f"schedule {schedule!r} is not valid: {error}",
            hint="check each field's range",
        ) from None
    except CroniterBadDateError:
        raise CronInvalidError(
            f"schedule {schedule!r} can never fire",
            hint="e.g. February has no 31st",
        ) from None


def _check_field(expression: str, where: str, field: tuple[str, int, int], value: str) -> None:
    """One field, read by croniter with every other field ``*``, so a refusal names it."""
    name, low, high = field
    outside = [n for n in _VALUE.findall(value) if not low <= int(n) <= high]
    if outside:
        raise CronInvalidError(
            f"{where}: the {name} field {value!r} is out of range: {outside[0]} is not in "
            f"{low}-{high}",
            hint=f"the {name} field takes {low} to {high}",
        )
    try:
        croniter(expression, datetime(2026, 1, 1)).get_next(datetime)
    except (CroniterBadCronError, CroniterBadTypeRangeError, CroniterBadDateError) as error:
        raise CronInvalidError(
            f"{where}: the {name} field {value!r} is not valid ({error})",
            hint=f"the {name} field takes {low} to {high}: a value, a list (a,b), a range (a-b) "
            "or a step (*/n)",
        ) from None


def unregister(name: str) -> None:
    registry.crons.unregister(name)


def registered_crons() -> list[CronHandle]:
    """Every cron, sorted by name in code-unit order (SPEC JOB-16)::

        >>> [(c.name, c.schedule) for c in registered_crons()]
        [('shop.jobs.nightly', '0 3 * * *')]

    ``manage.py xjobs manifest`` lists them with their next run.
    """
    # only @cron registers there; the registry types them as DeclaredCron so it never names
    # this module, which imports it
    return cast("list[CronHandle]", registry.crons.all())


def occurrences_between(
    handle: CronHandle, after: datetime, until: datetime, limit: int
) -> list[datetime]:
    """Occurrences in ``(after, until]``, walked forward, at most ``limit`` (SPEC SCHED-02)."""
    found: list[datetime] = []
    cursor = after
    while len(found) < limit:
        nxt = handle.next_occurrence(cursor)
        if nxt > until:
            break
        found.append(nxt)
        cursor = nxt
    return found


ONE_MICROSECOND = timedelta(microseconds=1)
