"""Where each job lives, for the routing driver's stores: one driver per alias, the routing
setting, the runs this process holds (each with the alias it was claimed from), and the one
way a read asks every alias (an alias that does not answer is said, never counted as empty)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TypeVar
from uuid import UUID

from ... import log
from ...conf.routing import Routing
from ...errors import AliasUnavailableError, RouteSpansError, first_line
from ..contract import EnqueueRequest, JobDriver
from ..failures import connection_failed

T = TypeVar("T")


def is_down(error: BaseException) -> bool:
    """True when ``error`` says a database could not be reached, not that a statement failed
    (by SQLSTATE and class, through what a store translated it into: drivers/failures.py)."""
    return isinstance(error, AliasUnavailableError) or connection_failed(error)


@contextmanager
def answering(alias: str) -> Iterator[None]:
    """Turn a database that does not answer into ``AliasUnavailableError`` naming ``alias``
    (SPEC SHARD-07); every other error passes as it is."""
    try:
        yield
    except Exception as error:
        if not is_down(error) or isinstance(error, AliasUnavailableError):
            raise
        raise AliasUnavailableError(
            f"database {alias!r}, one of the jobs' databases, did not answer: {first_line(error)}",
            hint=f"start it or fix DATABASES[{alias!r}]; its jobs are not counted anywhere "
            "until it answers",
        ) from error


class Placement:
    """The routing driver's shared state: handed to each of its stores."""

    def __init__(self, routing: Routing, drivers: Mapping[str, JobDriver]) -> None:
        self.routing = routing
        #: one driver per alias, the jobs database first
        self.drivers = {alias: drivers[alias] for alias in routing.aliases}
        self.primary = self.drivers[routing.default]
        self._held: dict[UUID, tuple[str, UUID]] = {}  # claimed job id -> (alias, run id)
        self._runs: dict[UUID, str] = {}  # claimed run id -> alias
        self._lock = threading.Lock()

    # --- where a job is written ------------------------------------------------------------

    def alias(self, request: EnqueueRequest) -> str:
        return self.routing.alias(request.queue, request.tenant_id)

    def check_after(self, alias: str, request: EnqueueRequest) -> None:
        """Refuse a job whose dependencies live in another database (SPEC SHARD-04): it could
        never be told they ended. An id no alias knows is left to the store's own refusal."""
        if not request.after:
            return
        ids = list(request.after)
        for other, driver in self.drivers.items():
            if other == alias:
                continue
            with answering(other):
                elsewhere = driver.reads().job_states(ids)
            if elsewhere:
                raise RouteSpansError(
                    f"job {request.name!r} on queue {request.queue!r} lives in database "
                    f"{alias!r} but waits for {', '.join(map(str, elsewhere))} in {other!r}",
                )

    def group(self, requests: Sequence[EnqueueRequest]) -> dict[str, list[int]]:
        """The positions of ``requests`` per alias, in order (each dependency checked)."""
        groups: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            alias = self.alias(request)
            self.check_after(alias, request)
            groups.setdefault(alias, []).append(index)
        return groups

    # --- where a job is read ----------------------------------------------------------------

    def gather(self, read: Callable[[JobDriver], T]) -> list[T]:
        """``read`` of every alias, the jobs database first; one that does not answer raises
        ``AliasUnavailableError`` (never an answer without its jobs)."""
        answers = []
        for alias, driver in self.drivers.items():
            with answering(alias):
                answers.append(read(driver))
        return answers

    def find(self, job_id: UUID) -> str | None:
        """The alias holding job ``job_id``: the one this process claimed it from, else the
        first that knows it (ids are UUIDv7 minted in the process: one alias holds each)."""
        held = self._held.get(job_id)
        if held is not None:
            return held[0]
        for alias, driver in self.drivers.items():
            with answering(alias):
                if driver.reads().job_states([job_id]):
                    return alias
        return None

    def owner(self, job_id: UUID) -> JobDriver:
        """The driver of job ``job_id``'s alias; the jobs database's for an unknown id (its
        store raises the not-found error the caller expects)."""
        alias = self.find(job_id)
        return self.primary if alias is None else self.drivers[alias]

    # --- the runs this process holds ---------------------------------------------------------

    def hold(self, alias: str, job_id: UUID, run_id: UUID) -> None:
        with self._lock:
            self._held[job_id] = (alias, run_id)
            self._runs[run_id] = alias

    def release(self, job_id: UUID) -> None:
        with self._lock:
            held = self._held.pop(job_id, None)
            if held is not None:
                self._runs.pop(held[1], None)

    def run_alias(self, run_id: UUID) -> str | None:
        return self._runs.get(run_id)

    def each_alias(self, write: Callable[[JobDriver], object], *, what: str) -> None:
        """``write`` on every alias; one that does not answer is passed over (a worker's
        presence must not stop at a database that is down), unless it is the jobs database."""
        for alias, driver in self.drivers.items():
            try:
                write(driver)
            except Exception as error:
                if alias == self.routing.default or not is_down(error):
                    raise
                self.passed_over(alias, error, what=what)

    def passed_over(self, alias: str, error: BaseException, *, what: str) -> None:
        """Alias ``alias`` did not answer ``what``: its connection on this thread is closed (the
        next call opens a new one, once the server is back) and it is logged, once per alias
        and ``QUIET`` seconds (SPEC SHARD-07)."""
        self.drivers[alias].close()
        log.throttled(
            logging.WARNING,
            "xjobs.route.alias_down",
            kind=f"{alias}:{what}",
            database=alias,
            what=what,
            error=first_line(error),
        )

    @contextmanager
    def settling(self, alias: str | None) -> Iterator[None]:
        """A write of a claimed run in ``alias``: when the database does not answer, this
        thread's connection to it is closed before the error goes on to the worker's own outage
        handling (which closes only a single jobs database's)."""
        try:
            yield
        except Exception as error:
            if alias is not None and is_down(error):
                self.drivers[alias].close()
            raise
