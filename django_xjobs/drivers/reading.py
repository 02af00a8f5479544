"""Reads off the primary: the driver the read surfaces ask, on ``XJOBS["READ_DATABASE"]``
(a streaming replica, say), and how old what it answers is (SPEC READ-01, READ-02).

The admin's lists and overview, ``xjobs ls/queues/show/why``, ``why_job`` and the metrics read
through ``read_driver()``. Every write, claim and fenced statement, and every read an operator's
action decides by (the job page, its buttons, what an action selects), stays on the jobs
database: ``get_driver()``.

A read database that does not answer is never read around in silence: ``read_driver()`` raises
``ReadDatabaseUnavailableError``, or, asked with ``fallback=True`` (the admin and the metrics,
whose pages and scrapes must not fail with the replica), answers the jobs database's driver with
a ``ReadSource`` whose ``problem`` says why, for the page to show and the scrape to export.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from .. import conf, log
from ..errors import DriverUnavailableError, ReadDatabaseUnavailableError
from . import create, get_driver
from .contract import JobDriver

_drivers: dict[tuple[str, str], JobDriver] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class ReadSource:
    """Where a read surface's figures come from and how old they are::

    >>> driver, source = read_driver()
    >>> source.database, source.standby, source.lag_seconds
    ('replica', True, 0.8)
    """

    #: the Django alias read (None: the memory driver, which is no database)
    database: str | None
    #: ``XJOBS["READ_DATABASE"]`` was read, not the jobs database
    replica: bool = False
    #: that alias is a standby (``pg_is_in_recovery()``)
    standby: bool = False
    #: how old the figures are, in seconds: 0.0 read from a primary (current); on a standby the
    #: time since the last transaction it replayed; None on a standby that replayed none yet
    lag_seconds: float | None = 0.0
    #: the read database did not answer: the coded line; the figures are the jobs database's
    problem: str | None = None

    def to_json(self) -> dict[str, object]:
        """What the ``--json`` answers carry as ``read_from``."""
        return {
            "database": self.database,
            "replica": self.replica,
            "standby": self.standby,
            "lag_seconds": self.lag_seconds,
            "problem": self.problem,
        }

    def note(self) -> str | None:
        """One line for a page or a command's text, or None when there is nothing to say (the
        jobs database was read, as configured)."""
        if self.problem is not None:
            return f"{self.problem}; read from the jobs database {self.database!r} instead"
        if not self.replica:
            return None
        if self.lag_seconds is None:
            return f"read from {self.database!r}, a standby that has replayed nothing yet"
        return f"read from {self.database!r}, {self.lag_seconds:.1f} s behind the jobs database"


#: the driver and source a ``reading()`` or ``reading_primary()`` block pinned
_pinned: ContextVar[tuple[JobDriver, ReadSource] | None] = ContextVar("xjobs_read", default=None)


def read_driver(*, fallback: bool = False) -> tuple[JobDriver, ReadSource]:
    """The driver the read surfaces ask, and where its answers come from: on
    ``XJOBS["READ_DATABASE"]`` when one is set, else the jobs database's (``get_driver()``).

    The read database is asked how far behind it is first (one statement), which also shows it
    answers. When it does not: ``ReadDatabaseUnavailableError``, or with ``fallback=True`` the
    jobs database's driver and a ``ReadSource`` whose ``problem`` says so (logged as
    ``xjobs.read.fallback``)::

        driver, source = read_driver(fallback=True)
        rows = driver.reads().stats()
    """
    pinned = _pinned.get()
    if pinned is not None:
        return pinned
    primary = get_driver()
    settings = conf.get()
    alias = settings.read_database
    if alias is None or primary.database is None or settings.driver == "memory":
        # no read database, or a store that is no database: what it answers is current
        return primary, ReadSource(primary.database)
    from .postgres.reading import read_lag

    try:
        standby, lag = read_lag(alias)
    except DriverUnavailableError as error:
        problem = ReadDatabaseUnavailableError(
            f'XJOBS["READ_DATABASE"]={alias!r} did not answer: {error.message}',
            hint=f"start the replica or fix DATABASES[{alias!r}]; the jobs database "
            f"{primary.database!r} still serves every write and the job page",
        )
        if not fallback:
            raise problem from error
        log.event(
            logging.WARNING,
            "xjobs.read.fallback",
            database=alias,
            primary=primary.database,
            error=error.message,
        )
        return primary, ReadSource(primary.database, problem=f"{problem.code}: {problem.message}")
    key = (settings.driver, alias)
    with _lock:
        driver = _drivers.get(key)
        if driver is None:
            driver = _drivers.setdefault(key, create(settings.driver, using=alias))
    return driver, ReadSource(alias, replica=True, standby=standby, lag_seconds=lag)


@contextmanager
def reading(*, fallback: bool = False) -> Iterator[ReadSource]:
    """Every read surface called in the block reads where one ``read_driver()`` chose, asked
    once: a page's figures come from one database, and say which (the admin's lists and
    overview, a metrics scrape)::

        with reading(fallback=True) as source:
            report = inspect_queues()  # from source.database
    """
    pair = read_driver(fallback=fallback)
    token = _pinned.set(pair)
    try:
        yield pair[1]
    finally:
        _pinned.reset(token)


@contextmanager
def reading_primary() -> Iterator[ReadSource]:
    """Every read surface called in the block reads the jobs database: the reads an operator
    acts on (the job page and its buttons, an action's selection) must be fresh."""
    primary = get_driver()
    token = _pinned.set((primary, ReadSource(primary.database)))
    try:
        yield ReadSource(primary.database)
    finally:
        _pinned.reset(token)


def figures_database() -> str | None:
    """The alias a figure shown on every page reads (the admin nav bar's dead count, SPEC
    READ-10): the read database when one is set and answers, even beside a page that reads the
    jobs database (a count is not acted on), else the jobs database. A page that already asked
    the read database is not asked again."""
    pinned = _pinned.get()
    if pinned is not None and (pinned[1].replica or pinned[1].problem is not None):
        return pinned[1].database
    token = _pinned.set(None)
    try:
        return read_driver(fallback=True)[1].database
    finally:
        _pinned.reset(token)


def pinned_database() -> str | None:
    """The alias a ``reading()`` block reads, or None outside one (or on the memory driver)."""
    pinned = _pinned.get()
    return None if pinned is None else pinned[1].database
