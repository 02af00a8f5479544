"""``backfill()``: sweep a table in primary-key order, a page per durable step, paced, resumable,
recorded once per environment in the ``x_backfills`` ledger (SPEC §16, BF-01..07).

A backfill is an ordinary job (BF-01): its name is its idempotency key, so one pass per name is
live at a time, and its only input is ``force``. Each page runs inside ``ctx.step.run("batch:<i>")``
(BF-03), which stores the cursor and the running totals, never the rows: a killed pass resumes at
the next page. The pace (``rate`` pages a second) is kept inside the page's step, so replayed
pages wait for nothing (BF-04).
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import conf, log, metrics, redact
from ..declarations.job import JobHandle, job
from ..durations import Duration
from ..errors import (
    BackfillAppliedError,
    BackfillEnvironmentError,
    BackfillStalledError,
    InvariantDefinitionError,
    InvariantError,
    JobAbortedError,
    JobInterrupt,
    describe_error,
)
from ..retry import Retry
from ..text import storable

if TYPE_CHECKING:
    from ..drivers.contract import BackfillLedger

#: what the ledger records as the code that ran a pass
APP_VERSION = "django-xjobs"


@dataclass(frozen=True)
class Backfill:
    """A backfill's declaration, as its pass and the operator tools read it."""

    name: str
    handler: Callable[..., Any]
    queryset: Callable[[], Any]
    batch: int
    rate: float
    environments: tuple[str, ...] | None
    requires: tuple[str, str] | None
    checksum: str

    def runs_in(self, environment: str | None) -> bool:
        return self.environments is None or environment in self.environments

    def check_environment(self, environment: str | None) -> None:
        """``X_BACKFILL_ENVIRONMENT`` unless this backfill runs in ``environment`` (SPEC BF-06):
        the pass and the command line refuse with the same line."""
        if self.runs_in(environment):
            return
        declared = ", ".join(self.environments or ())
        raise BackfillEnvironmentError(
            f"backfill {self.name!r} runs in {declared}; this is "
            f"{environment or 'an unnamed environment'}",
            hint=f"run it in {declared}, or add {environment!r} to its environments="
            if environment
            else f'this process has no XJOBS["ENVIRONMENT"]; run it where that is {declared}',
        )

    def source(self) -> Any:
        """``queryset()``, checked to be a queryset this pass can page through."""
        from django.db.models import QuerySet
        from django.db.models.query import ModelIterable

        rows = self.queryset()
        if not isinstance(rows, QuerySet):
            raise InvariantError(
                f"backfill {self.name!r}: queryset() returned {type(rows).__name__}, not a QuerySet",
                hint="return the rows still to do, e.g. Order.objects.filter(currency__isnull=True)",
            )
        if rows._iterable_class is not ModelIterable:
            raise InvariantError(
                f"backfill {self.name!r}: queryset() returns values(), not model instances",
                hint="drop .values()/.values_list(): the handler gets model instances; use "
                ".only(...) to read fewer columns",
            )
        if rows.query.is_sliced:
            raise InvariantError(
                f"backfill {self.name!r}: queryset() is sliced; the pass pages through it itself",
                hint="drop the [:n]; set batch= for the page size",
            )
        return rows

    def remaining(self) -> int:
        """How many rows the queryset still matches (SPEC BF-06: a safe, non-negative count)."""
        count = self.source().count()
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count < 2**53:
            raise InvariantError(
                f"backfill {self.name!r}: queryset().count() returned {count!r}",
                hint="count() must be a whole number of rows",
            )
        return count


def backfill(
    fn: Callable[..., object] | None = None,
    *,
    name: str,
    queryset: Callable[[], object],
    batch: int = 1000,
    rate: float = 5,
    environments: Sequence[str] | None = None,
    requires: tuple[str, str] | None = None,
    queue: str = "default",
    retry: Retry | None = None,
    timeout: Duration | None = None,
) -> Any:
    """Declare a backfill: ``fn(ctx, rows)`` gets one page of model instances at a time, in
    primary-key order, and fixes them so ``queryset()`` no longer matches them::

        @backfill(
            name="orders.fill_currency",
            queryset=lambda: Order.objects.filter(currency__isnull=True),
            batch=500,
            rate=5,
            environments=["production", "staging"],
            requires=("shop", "0042_order_currency"),
        )
        def fill_currency(ctx, rows):
            for order in rows:
                order.currency = "EUR"
            Order.objects.bulk_update(rows, ["currency"])

    Returns the pass's job handle: ``fill_currency.enqueue()`` (or ``force=True`` to run a
    completed backfill again), or ``manage.py xjobs_backfill orders.fill_currency``.
    """

    def declare(handler: Callable[..., object]) -> JobHandle:
        spec = _check(handler, name, queryset, batch, rate, environments, requires)

        def run_pass(ctx: object, force: bool = False) -> dict[str, Any]:
            return _pass(spec, ctx, force)

        run_pass.__module__ = handler.__module__
        run_pass.__qualname__ = handler.__qualname__
        run_pass.__doc__ = handler.__doc__
        handle = job(
            name=name,
            idempotency_key=name,  # one live pass per name (BF-01)
            queue=queue,
            retry=retry,
            timeout=timeout,
        )(run_pass)
        handle.backfill = spec
        _declared[name] = Declared(handle, spec)
        return handle

    return declare if fn is None else declare(fn)


@dataclass(frozen=True)
class Declared:
    """A backfill as declared: its pass's job handle and its spec."""

    handle: JobHandle
    spec: Backfill


#: every backfill declared in this process, by name
_declared: dict[str, Declared] = {}


def declared_backfill(name: str) -> Declared | None:
    """The backfill declared under ``name`` while its pass's job is the one registered under
    that name (a test may unregister it, a reload declare it again)."""
    from ..declarations import registry

    found = _declared.get(name)
    if found is None or registry.jobs.get(name) is not found.handle:
        return None
    return found


def registered_backfills() -> list[Backfill]:
    """Every declared backfill whose job is still registered, sorted by name::

        >>> [(b.name, b.remaining()) for b in registered_backfills()]
        [('orders.fill_currency', 1200)]

    ``manage.py xjobs_backfill --list`` shows them with their ledger state.
    """
    return [declared.spec for declared in declared_backfills()]


def declared_backfills() -> list[Declared]:
    """``registered_backfills()`` with each pass's job handle."""
    found = (declared_backfill(name) for name in sorted(_declared))
    return [declared for declared in found if declared is not None]


def get_backfill(name: str) -> Backfill | None:
    return next((b for b in registered_backfills() if b.name == name), None)


# --- declaration --------------------------------------------------------------------------------


def ledger_or_none() -> BackfillLedger | None:
    """The driver's backfill ledger, or None where it keeps none: a pass then runs with no
    bookkeeping (SPEC BF-07, ``features.supports_backfill_ledger``)."""
    from ..drivers import get_driver

    driver = get_driver()
    return driver.backfills() if driver.features.supports_backfill_ledger else None


def _check(
    handler: Any,
    name: Any,
    queryset: Any,
    batch: Any,
    rate: Any,
    environments: Any,
    requires: Any,
) -> Backfill:
    """SPEC BF-02: every mistake is refused at import, with a code and a hint."""
    where = f"backfill {name!r}"
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise InvariantDefinitionError(
            f"backfill name={name!r} must be a non-empty string of at most 200 characters",
            hint='a stable name, e.g. name="orders.fill_currency": the ledger is keyed by it',
        )
    if not callable(handler) or inspect.iscoroutinefunction(handler):
        raise InvariantDefinitionError(
            f"{where}: @backfill decorates a plain function fn(ctx, rows), got {handler!r}",
            hint="put @backfill(...) directly above def fn(ctx, rows)",
        )
    params = list(inspect.signature(handler).parameters.values())
    if len(params) != 2 or any(
        p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params
    ):
        raise InvariantDefinitionError(
            f"{where}: the handler takes ({', '.join(p.name for p in params)}), not (ctx, rows)",
            hint="def fill(ctx, rows): ... gets one page of model instances",
        )
    if not callable(queryset):
        raise InvariantDefinitionError(
            f"{where}: queryset= must be a callable returning a QuerySet, got "
            f"{type(queryset).__name__}",
            hint="queryset=lambda: Order.objects.filter(currency__isnull=True): called per pass",
        )
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch < 2**53:
        raise InvariantDefinitionError(
            f"{where}: batch={batch!r} must be a whole number of rows, at least 1",
            hint="the rows per page; the default is 1000",
        )
    if (
        isinstance(rate, bool)
        or not isinstance(rate, int | float)
        or not math.isfinite(rate)
        or rate <= 0
    ):
        raise InvariantDefinitionError(
            f"{where}: rate={rate!r} must be a finite number of pages per second above 0",
            hint="the default is 5; a large number (1e6) is as good as no limit",
        )
    envs: tuple[str, ...] | None = None
    if environments is not None:
        if isinstance(environments, str) or not all(isinstance(e, str) and e for e in environments):
            raise InvariantDefinitionError(
                f"{where}: environments={environments!r} must be a list of names",
                hint='e.g. environments=["production", "staging"], matched against '
                'XJOBS["ENVIRONMENT"]',
            )
        envs = tuple(environments)
        if not envs:
            raise InvariantDefinitionError(
                f"{where}: environments=[] would never run",
                hint="omit environments= to run everywhere",
            )
    needs = _check_requires(where, requires)
    return Backfill(
        name=name,
        handler=handler,
        queryset=queryset,
        batch=batch,
        rate=float(rate),
        environments=envs,
        requires=needs,
        checksum=_checksum(name, handler, batch, rate, envs, needs),
    )


def _check_requires(where: str, requires: object) -> tuple[str, str] | None:
    if requires is None:
        return None
    if (
        not isinstance(requires, tuple | list)
        or len(requires) != 2
        or not all(isinstance(part, str) and part for part in requires)
    ):
        raise InvariantDefinitionError(
            f"{where}: requires={requires!r} must be (app_label, migration_name)",
            hint='e.g. requires=("shop", "0042_order_currency")',
        )
    label, migration = requires
    known = _migrations_on_disk()
    if (label, migration) not in known:
        names = sorted(n for app, n in known if app == label)
        raise InvariantDefinitionError(
            f"{where}: requires={tuple(requires)!r} names no migration on disk",
            hint=f"{label}'s migrations: {', '.join(names[-5:])}"
            if names
            else f"no app labelled {label!r} has migrations",
        )
    return (label, migration)


def _migrations_on_disk() -> set[tuple[str, str]]:
    from django.db.migrations.loader import MigrationLoader

    global _MIGRATIONS
    if _MIGRATIONS is None:
        _MIGRATIONS = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    return _MIGRATIONS


_MIGRATIONS: set[tuple[str, str]] | None = None


def _checksum(
    name: str,
    handler: Any,
    batch: int,
    rate: float,
    environments: tuple[str, ...] | None,
    requires: tuple[str, str] | None,
) -> str:
    """What the declaration says, hashed: a changed handler or setting warns at its next pass."""
    try:
        code = inspect.getsource(handler)
    except (OSError, TypeError):
        code = f"{handler.__module__}.{handler.__qualname__}"
    text = repr((name, code, batch, float(rate), environments, requires))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --- the pass -----------------------------------------------------------------------------------


def _pass(spec: Backfill, ctx: Any, force: bool) -> dict[str, Any]:
    environment = conf.get().environment
    spec.check_environment(environment)  # BF-06: before the ledger row is written
    ledger = ledger_or_none()  # None: no bookkeeping (BF-07)
    if ledger is not None:
        done = ledger.completed(spec.name, environment)
        if done is not None and done.run_id != ctx.run_id:
            if not force:
                raise BackfillAppliedError(
                    f"backfill {spec.name!r} completed on {done.completed_at:%Y-%m-%d %H:%M} "
                    f"({done.rows_processed} rows)",
                    hint="enqueue it with force=True (xjobs_backfill NAME --force) to run it again",
                )
            if done.checksum != spec.checksum:
                log.event(
                    logging.WARNING,
                    "xjobs.backfill.changed",
                    backfill=spec.name,
                    completed=done.checksum,
                    now=spec.checksum,
                )
        ledger.start(
            run_id=ctx.run_id,
            job_id=ctx.job_id,
            name=spec.name,
            checksum=spec.checksum,
            app_version=APP_VERSION,
            environment=environment,
        )
    try:
        totals = _pages(spec, ctx, ledger)
        remaining = spec.remaining()
        if remaining:
            raise BackfillStalledError(
                f"backfill {spec.name!r} went through every page and queryset() still matches "
                f"{remaining} row(s)",
                hint="the handler must change each row it is given so queryset() no longer "
                "matches it",
            )
    except JobInterrupt:
        raise  # cancelled or lost: the pass is not this run's to record any more
    except BaseException as error:
        if ledger is not None:
            # a stored text like any other: a NUL in it would fail the ledger's own write
            # (issue 24 §3), and the hook sees it (issue 26)
            reason = storable(redact.redact(describe_error(error)))
            ledger.finish(ctx.run_id, status="failed", error=reason)
        raise
    if ledger is not None:
        ledger.finish(ctx.run_id, status="completed")
    log.event(
        logging.INFO,
        "xjobs.backfill.completed",
        backfill=spec.name,
        rows=totals["rows"],
        pages=totals["pages"],
    )
    return {"rows": totals["rows"], "pages": totals["pages"]}


def _pages(spec: Backfill, ctx: Any, ledger: Any) -> dict[str, Any]:
    """Every page, each one a durable step; the totals at the end."""
    state: dict[str, Any] = {"cursor": None, "rows": 0, "pages": 0}
    pace = {"last": None}  # this attempt's previous page start (monotonic), for the throttle
    index = 0
    while True:
        before = dict(state)

        def page(before: dict[str, Any] = before) -> dict[str, Any]:
            _throttle(spec, ctx, pace)
            rows = spec.source().order_by("pk")
            if before["cursor"] is not None:
                rows = rows.filter(pk__gt=before["cursor"])
            found = list(rows[: spec.batch])
            if not found:
                return {**before, "done": True}
            spec.handler(ctx, found)
            after = {
                "cursor": _cursor(found[-1].pk),
                "rows": before["rows"] + len(found),
                "pages": before["pages"] + 1,
                "done": len(found) < spec.batch,
            }
            if ledger is not None:
                ledger.progress(
                    ctx.run_id,
                    cursor=str(after["cursor"]),
                    rows=after["rows"],
                    pages=after["pages"],
                )
            metrics.inc("xjobs_backfill_rows_total", len(found), backfill=spec.name)
            metrics.inc("xjobs_backfill_pages_total", 1, backfill=spec.name)
            return after

        result = ctx.step.run(f"batch:{index}", page)
        state = {k: result[k] for k in ("cursor", "rows", "pages")}
        if result.get("done"):
            return state
        index += 1


def _throttle(spec: Backfill, ctx: Any, pace: dict[str, Any]) -> None:
    """Keep pages ``1/rate`` s apart, waiting on the run's signal (BF-04: a cancel stops it)."""
    now = time.monotonic()
    last = pace["last"]
    if last is not None:
        wait = last + 1 / spec.rate - now
        if wait > 0 and ctx.signal.wait(wait):
            raise JobAbortedError(
                f"backfill {spec.name!r} was stopped while it paced its pages",
                hint=str(ctx.signal.reason) if ctx.signal.reason else "",
            )
    pace["last"] = time.monotonic()


def _cursor(pk: object) -> int | str:
    """A primary key as the step stores it: an int stays one, anything else as its text."""
    return pk if isinstance(pk, int) and not isinstance(pk, bool) else str(pk)
