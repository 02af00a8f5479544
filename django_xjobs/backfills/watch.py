"""Follow a backfill's pass to its end (``xjobs_backfill --wait``): rows done against an estimate
of the total, the rate and the time left, until the pass's job finishes.

The watch only reads: the job's row and its pass's ledger row, every ``interval`` seconds, and the
backfill's ``remaining()`` count now and then (a count over a large table is not free).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from ..drivers import get_driver
from ..drivers.contract import JobSnapshot
from ..durations import format_span
from ..errors import JobNotFoundError
from ..states import FINISHED_STATES
from . import Backfill

#: seconds between two reads of the job and its ledger row
POLL_INTERVAL = 0.5
#: seconds between two ``remaining()`` counts for the total
ESTIMATE_INTERVAL = 60.0
#: seconds between two progress lines when stderr is not a terminal
LINE_INTERVAL = 10.0


@dataclass(frozen=True)
class Progress:
    """One look at a pass: what its job and its ledger row say, and what that makes of it."""

    backfill: str
    job_id: UUID
    queue: str
    state: str
    rows: int
    pages: int
    #: rows done plus the rows ``remaining()`` last counted; None before a count
    total: int | None
    #: rows a second since the watch began; None until rows moved
    rate: float | None

    @property
    def eta(self) -> float | None:
        """Seconds left at this rate; None while the rate or the total is unknown."""
        if self.rate is None or self.total is None or self.rate <= 0:
            return None
        return max(self.total - self.rows, 0) / self.rate

    def line(self) -> str:
        """``orders.fill_currency running  1,200/5,000 rows (24%)  6 pages  410 rows/s  ETA 9s``"""
        if self.total:
            share = f" ({min(self.rows * 100 // self.total, 100)}%)"
            done = f"{self.rows:,}/{self.total:,} rows{share}"
        else:
            done = f"{self.rows:,} rows"
        parts = [f"{self.backfill} {self.state}", done, pages(self.pages)]
        if self.state in ("ready", "delayed"):
            parts.append(f"waiting for a worker on queue {self.queue}")
        if self.rate is not None:
            parts.append(f"{self.rate:,.0f} rows/s")
        if self.eta is not None and self.state not in FINISHED_STATES:
            parts.append(f"ETA {format_span(self.eta)}")
        return "  ".join(parts)


def pages(n: int) -> str:
    return f"{n:,} page" if n == 1 else f"{n:,} pages"


class PassWatch:
    """Reads one pass until its job finishes::

    job, progress = PassWatch(spec, job_id).run(ProgressDisplay(sys.stderr.write).show)
    job.state, progress.rows  # ('done', 5000)
    """

    def __init__(
        self,
        spec: Backfill,
        job_id: UUID,
        *,
        interval: float = POLL_INTERVAL,
        estimate_interval: float = ESTIMATE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        stop: threading.Event | None = None,
    ) -> None:
        self.spec = spec
        self.job_id = job_id
        self.interval = interval
        self.estimate_interval = estimate_interval
        self.clock = clock
        self.stop = stop or threading.Event()
        self._first: tuple[float, int] | None = None  # (when, rows) at the first look
        self._estimate: tuple[float, int] | None = None  # (when, rows + remaining) at the count

    def poll(self) -> tuple[JobSnapshot, Progress]:
        driver = get_driver()
        job = driver.reads().get_job(self.job_id)
        if job is None:
            raise JobNotFoundError(
                f"the pass of backfill {self.spec.name!r}, job {self.job_id}, is gone",
                hint="it was pruned while it was watched; python manage.py xjobs_backfill --list "
                "shows its ledger row",
            )
        ledger = driver.backfills() if driver.features.supports_backfill_ledger else None
        row = None if ledger is None else ledger.get(job.run_id)
        rows, pages = (row.rows_processed, row.pages) if row is not None else (0, 0)
        now = self.clock()
        if self._first is None:
            self._first = (now, rows)
        finished = job.state in FINISHED_STATES
        if finished and job.state == "done":
            total: int | None = rows
        else:
            if not finished and (
                self._estimate is None or now - self._estimate[0] >= self.estimate_interval
            ):
                self._estimate = (now, rows + self.spec.remaining())
            total = None if self._estimate is None else max(self._estimate[1], rows)
        since, rows_then = self._first
        rate = (rows - rows_then) / (now - since) if now > since and rows > rows_then else None
        return job, Progress(self.spec.name, job.id, job.queue, job.state, rows, pages, total, rate)

    def run(self, show: Callable[[Progress], None]) -> tuple[JobSnapshot, Progress]:
        """Poll until the job finishes (or ``stop`` is set), showing each look; the last look."""
        while True:
            job, progress = self.poll()
            show(progress)
            if job.state in FINISHED_STATES or self.stop.wait(self.interval):
                return job, progress


class ProgressDisplay:
    """Progress on a terminal is one line redrawn in place; elsewhere (a CI log) a line when
    something moved, at most every ``LINE_INTERVAL`` seconds, and the last one."""

    def __init__(
        self,
        write: Callable[[str], None],
        *,
        tty: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.write = write
        self.tty = tty
        self.clock = clock
        self._width = 0
        self._last: tuple[float, str] | None = None

    def show(self, progress: Progress) -> None:
        text = progress.line()
        final = progress.state in FINISHED_STATES
        if self.tty:
            self.write("\r" + text.ljust(self._width) + ("\n" if final else ""))
            self._width = 0 if final else len(text)
            return
        now = self.clock()
        due = self._last is None or (text != self._last[1] and now - self._last[0] >= LINE_INTERVAL)
        if due or final:
            self.write(text + "\n")
            self._last = (now, text)
