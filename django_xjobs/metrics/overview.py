"""The fleet overview's figures (issue 30), from the rollup (rollup.py), the depth samples
(worker/depth.py) and the live counts: per queue and per job name over a window, what ended per
time slot, failure rate, wait and run-time p50 / p95, the top failing jobs, each queue's depth
(ready, delayed, running) over time; never a scan of ``x_jobs`` per page view. The admin's
overview page (admin/overview.py) renders it; the tests read it directly."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from ..drivers.contract import DepthSample, JobDriver
from ..drivers.reading import read_driver
from ..drivers.routing.surface import per_alias
from ..rollup import BOUNDS, RollupRow, merged, quantile

#: the windows the page offers: label -> (span, slot width)
WINDOWS: dict[str, tuple[timedelta, timedelta]] = {
    "1h": (timedelta(hours=1), timedelta(minutes=1)),
    "1d": (timedelta(days=1), timedelta(minutes=15)),
}
FAILED = ("retried", "failed", "dead")


@dataclass
class Figures:
    """What ended for one queue, or one job name of a queue, over the window."""

    queue: str
    name: str | None
    done: int = 0
    retried: int = 0
    failed: int = 0
    dead: int = 0
    run_p50: float | None = None
    run_p95: float | None = None
    wait_p50: float | None = None
    wait_p95: float | None = None
    #: per slot, oldest first: (done, failed or retried, dead)
    slots: list[tuple[int, int, int]] = field(default_factory=list)
    #: the database the figures are of, with jobs in several (SPEC SHARD-23); else None
    alias: str | None = None

    @property
    def total(self) -> int:
        return self.done + self.retried + self.failed + self.dead

    @property
    def failure_rate(self) -> float | None:
        """Attempts that failed (retried, failed or dead) of all that ended; None for none."""
        return None if not self.total else (self.total - self.done) / self.total


@dataclass
class Depth:
    """One queue's sampled depth over the window."""

    queue: str
    #: per slot, oldest first: (ready, delayed, running) of the slot's deepest sample (the
    #: largest total; a day's 15-minute slots hold 15 samples each), zeros where none was taken
    slots: list[tuple[int, int, int]]
    #: the queue at the fleet's latest sample: zeros when it had no live job then (a sample
    #: writes only the queues with live jobs)
    latest: DepthSample
    #: the database the queue's samples are of, with jobs in several; else None
    alias: str | None = None


@dataclass
class Overview:
    window: str
    since: datetime
    slot_starts: list[datetime]
    queues: list[Figures]
    jobs: list[Figures]
    depth: list[Depth] = field(default_factory=list)
    #: with jobs in several databases, each that did not answer and why: its figures are left
    #: out, never shown as nothing ended (SPEC SHARD-23)
    down: dict[str, str] = field(default_factory=dict)


def overview(window: str, now: datetime) -> Overview:
    """The figures of the last ``window`` ("1h" or "1d") before ``now``, from the read database
    (``XJOBS["READ_DATABASE"]``, SPEC READ-01)."""
    span, width = WINDOWS[window]
    start = _floor(now - span, width) + width
    count = int(span / width)
    starts = [start + width * i for i in range(count)]
    driver = read_driver()[0]
    split = per_alias(driver, lambda each: _read(each, start))  # SPEC SHARD-23
    parts: list[tuple[str | None, list[RollupRow], list[DepthSample]]]
    if split is None:
        parts = [(None, *_read(driver, start))]
        down: dict[str, str] = {}
    else:
        parts = [(a.alias, *a.answer) for a in split if a.answer is not None]
        down = {a.alias: a.problem or "" for a in split if a.answer is None}
    queues, jobs, depth = [], [], []
    for alias, rows, samples in parts:
        by_queue: dict[str, list[RollupRow]] = {}
        by_job: dict[tuple[str, str], list[RollupRow]] = {}
        for row in rows:
            by_queue.setdefault(row.queue, []).append(row)
            by_job.setdefault((row.queue, row.name), []).append(row)
        queues += [_figures(q, None, by_queue[q], start, width, count, alias) for q in by_queue]
        jobs += [_figures(q, n, by_job[q, n], start, width, count, alias) for q, n in by_job]
        depth += _depth(samples, start, width, count, alias)
    queues.sort(key=lambda f: (f.queue, f.alias or ""))
    jobs.sort(key=lambda f: (f.queue, f.name or "", f.alias or ""))
    depth.sort(key=lambda d: (d.queue, d.alias or ""))
    return Overview(window, start, starts, queues, jobs, depth, down)


def _read(driver: JobDriver, start: datetime) -> tuple[list[RollupRow], list[DepthSample]]:
    history = driver.history()
    return history.read_rollups(start), history.read_depths(start)


def _depth(
    samples: list[DepthSample], start: datetime, width: timedelta, n: int, alias: str | None
) -> list[Depth]:
    by_queue: dict[str, list[DepthSample]] = {}
    for sample in samples:  # in minute order
        by_queue.setdefault(sample.queue, []).append(sample)
    depth = []
    for queue in sorted(by_queue):
        slots = [(0, 0, 0)] * n
        for sample in by_queue[queue]:
            index = min(int((sample.minute - start) / width), n - 1)
            counts = (sample.ready, sample.delayed, sample.running)
            if sum(counts) > sum(slots[index]):
                slots[index] = counts
        last = by_queue[queue][-1]
        if last.minute < samples[-1].minute:  # drained since: the fleet sampled it empty
            last = DepthSample(samples[-1].minute, queue, 0, 0, 0)
        depth.append(Depth(queue, slots, last, alias))
    return depth


def _figures(
    queue: str,
    name: str | None,
    rows: list[RollupRow],
    start: datetime,
    width: timedelta,
    n: int,
    alias: str | None = None,
) -> Figures:
    figures = Figures(queue, name, alias=alias)
    slots = [[0, 0, 0] for _ in range(n)]
    for row in rows:
        setattr(figures, row.outcome, getattr(figures, row.outcome) + row.count)
        index = min(int((row.minute - start) / width), n - 1)
        column = 0 if row.outcome == "done" else 2 if row.outcome == "dead" else 1
        slots[index][column] += row.count
    figures.slots = [(a, b, c) for a, b, c in slots]
    total = merged(rows)
    if total is not None:
        figures.run_p50 = quantile(total.run_buckets, 0.5)
        figures.run_p95 = quantile(total.run_buckets, 0.95)
        figures.wait_p50 = quantile(total.wait_buckets, 0.5)
        figures.wait_p95 = quantile(total.wait_buckets, 0.95)
    return figures


def _floor(moment: datetime, width: timedelta) -> datetime:
    epoch = moment - datetime.min.replace(tzinfo=moment.tzinfo)
    return moment - (epoch % width)


def seconds_text(value: float | None) -> str:
    """A bucket bound as the page prints it: "≤ 250 ms", "≤ 5 s", "> 1 h"."""
    if value is None:
        return "-"
    prefix = "> " if value >= BOUNDS[-1] else "≤ "
    if value < 1:
        return f"{prefix}{value * 1000:g} ms"
    if value < 120:
        return f"{prefix}{value:g} s"
    if value < 7200:
        return f"{prefix}{value / 60:g} m"
    return f"{prefix}{value / 3600:g} h"


#: the ended chart's series, bottom up: colour and what its tooltip calls it
ENDED = (("#2e7d32", "done"), ("#f9a825", "failed"), ("#c62828", "dead"))
#: the depth chart's series, bottom up
DEPTH = (("#1565c0", "ready"), ("#90a4ae", "delayed"), ("#6a1b9a", "running"))


#: pixels under a chart for its time axis
AXIS = 12


def chart(
    slots: list[tuple[int, int, int]],
    *,
    width: int = 180,
    height: int = 48,
    series: tuple[tuple[str, str], ...] = ENDED,
    starts: list[datetime] | None = None,
    slot: timedelta | None = None,
) -> str:
    """Stacked bars per slot (by default done green, failed amber, dead red; ``DEPTH`` for the
    depth chart) as inline SVG markup: numbers and times only, no text from the database, so it
    is safe to mark safe. With ``starts`` (each slot's start) and ``slot`` (its width), a time
    axis under the bars and, on each slot, a tooltip with its minute and its counts (issue 42)."""
    top = max([sum(s) for s in slots] + [1])
    bar = width / max(len(slots), 1)
    timed = starts is not None and slot is not None and len(starts) == len(slots)
    total = height + (AXIS if timed else 0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="xjobs-chart" width="{width}" '
        f'height="{total}" viewBox="0 0 {width} {total}" role="img">',
        f'<rect width="{width}" height="{height}" fill="none" stroke="#ccc"/>',
    ]
    for i, counts in enumerate(slots):
        y = float(height)
        title = ", ".join(f"{n} {label}" for n, (_, label) in zip(counts, series, strict=True))
        if timed:
            assert starts is not None and slot is not None
            title = f"{_slot_text(starts[i], slot)}: {title}"
            # the whole slot answers the pointer, an empty one too
            parts.append(
                f'<rect class="xjobs-slot" x="{i * bar:.1f}" y="0" width="{max(bar, 1):.1f}" '
                f'height="{height}" fill="transparent"><title>{title}</title></rect>'
            )
        for count, (colour, _) in zip(counts, series, strict=True):
            if not count:
                continue
            h = count / top * (height - 2)
            y -= h
            parts.append(
                f'<rect x="{i * bar:.1f}" y="{y:.1f}" width="{max(bar - 1, 1):.1f}" '
                f'height="{h:.1f}" fill="{colour}"><title>{title}</title></rect>'
            )
    if timed:
        assert starts is not None and slot is not None
        parts += _axis(starts, slot, width, height)
    parts.append("</svg>")
    return "".join(parts)


def _local(moment: datetime) -> datetime:
    return timezone.localtime(moment) if timezone.is_aware(moment) else moment


def _slot_text(start: datetime, slot: timedelta) -> str:
    """A slot as its tooltip names it: its minute, or its span for a slot wider than one."""
    first = _local(start)
    if slot <= timedelta(minutes=1):
        return f"{first:%Y-%m-%d %H:%M} {first.tzname() or ''}".rstrip()
    last = _local(start + slot)
    return f"{first:%Y-%m-%d %H:%M} to {last:%H:%M} {last.tzname() or ''}".rstrip()


def _axis(starts: list[datetime], slot: timedelta, width: int, height: int) -> list[str]:
    """Ticks and labels under the bars: the window's start, its middle and its end (now)."""
    bar = width / len(starts)
    marks = [(0, starts[0]), (len(starts) // 2, starts[len(starts) // 2])]
    marks.append((len(starts), starts[-1] + slot))
    parts = ['<g class="xjobs-axis" font-size="9" fill="#666">']
    for index, moment in marks:
        x = min(index * bar, width - 0.5)
        anchor = "start" if index == 0 else "end" if index == len(starts) else "middle"
        parts.append(
            f'<line x1="{x:.1f}" y1="{height}" x2="{x:.1f}" y2="{height + 3}" stroke="#999"/>'
            f'<text x="{x:.1f}" y="{height + AXIS - 1}" text-anchor="{anchor}">'
            f"{_local(moment):%H:%M}</text>"
        )
    parts.append("</g>")
    return parts
