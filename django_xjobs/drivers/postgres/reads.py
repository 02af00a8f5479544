"""The PostgreSQL driver's reads: jobs, queues and workers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from ...payload import JSONValue
from ..contract import (
    JobSnapshot,
    QueueStats,
    Standing,
    VersionCount,
    WorkerSnapshot,
)
from . import standing as postgres_standing

if TYPE_CHECKING:
    from ...models.jobs import JobColumns
from .state import PostgresState, _json, snapshot


class PostgresReads(PostgresState):
    """``ReadStore`` on ``jobs.sql``; none of these writes."""

    def workers(self) -> list[WorkerSnapshot]:
        return [
            WorkerSnapshot(
                id=r[0],
                host=r[1],
                pid=r[2],
                queues=tuple(_json(r[3])),
                started_at=r[4],
                last_seen=r[5],
                expires_at=r[6],
                in_flight=r[7],
                alive=r[8],
                stopped_at=r[9],
            )
            for r in self._run("workers", {})
        ]

    def stats(self) -> list[QueueStats]:
        return _with_dead(self._stats(), self._history_dead())

    def _history_dead(self) -> dict[str, int]:
        """HIST-04: the dead jobs moved to the history, per queue (its dead partitions only)."""
        from django.db.models import Count

        from ...models import JobHistory

        rows = JobHistory.objects.using(self.using).filter(state="dead").values("queue")
        return {r["queue"]: r["n"] for r in rows.annotate(n=Count("id")).order_by()}

    def _stats(self) -> list[QueueStats]:
        return [
            QueueStats(
                queue=r[0],
                ready=r[1],
                delayed=r[2],
                running=r[3],
                suspended=r[4],
                dead=r[5],
                oldest_ready_seconds=float(r[6]),
            )
            for r in self._run("stats", {})
        ]

    # --- reads (ORM) ------------------------------------------------------------------------

    def get_job(self, job_id: UUID) -> JobSnapshot | None:
        from ...models import Job, JobHistory

        row = Job.objects.using(self.using).filter(pk=job_id).first()
        if row is not None:
            return snapshot(row)
        # HIST-04: a finished job moved out of x_jobs is found in the history
        moved = JobHistory.objects.using(self.using).filter(pk=job_id).first()
        return None if moved is None else snapshot(moved)

    def list_jobs(
        self,
        *,
        queue: str | None = None,
        name: str | None = None,
        state: str | None = None,
        limit: int = 100,
        error_code: str | None = None,
        input: Mapping[str, JSONValue] | None = None,
    ) -> list[JobSnapshot]:
        from ...models import Job, JobHistory
        from ...states import FINISHED_STATES

        found = []
        for model in (Job, JobHistory):  # HIST-04: the live table, then the history
            if model is JobHistory and state is not None and state not in FINISHED_STATES:
                continue  # the history holds finished rows only
            found += self._listed(model, queue, name, state, limit, error_code, input)
        found.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        return found[:limit]

    def _listed(
        self,
        model: type[JobColumns],
        queue: str | None,
        name: str | None,
        state: str | None,
        limit: int,
        error_code: str | None,
        input: Mapping[str, JSONValue] | None,
    ) -> list[JobSnapshot]:
        from django.db.models import Q

        rows = model._default_manager.using(self.using).all()
        if error_code is not None:  # the code before the first colon (bulk.sql's admits)
            rows = rows.filter(
                Q(last_error=error_code) | Q(last_error__startswith=f"{error_code}:")
            )
        if input is not None:  # jsonb @>
            rows = rows.filter(input__contains=dict(input))
        for field, value in (("queue", queue), ("name", name)):
            if value is not None:
                rows = rows.filter(**{field: value})
        if state is not None:
            from ...models import state_filter  # the app registry is ready by the first read

            rows = rows.filter(state_filter(state))
        return [snapshot(r) for r in rows.order_by("-created_at", "-id")[:limit]]

    def job_ids_between(self, low: UUID, high: UUID, *, limit: int) -> list[UUID]:
        from ...models import Job, JobHistory

        ids: list[UUID] = []
        for model in (Job, JobHistory):  # HIST-04: a prefix names a job wherever it lives
            rows = model.objects.using(self.using).filter(id__gte=low, id__lte=high)
            ids += rows.order_by("id").values_list("id", flat=True)[:limit]
        return sorted(set(ids))[:limit]

    def dead_letters(self, *, limit: int = 100) -> list[JobSnapshot]:
        from ...models import Job, JobHistory

        found = []
        for model in (Job, JobHistory):  # HIST-04: the dead moved to the history too
            rows = model.objects.using(self.using).filter(state="dead")
            found += [snapshot(r) for r in rows.order_by("-updated_at", "-id")[:limit]]
        found.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        return found[:limit]

    def standing(self, job_id: UUID, *, cap: int, fair: bool = False) -> Standing | None:
        return postgres_standing.standing(self.using, job_id, cap=cap, fair=fair)

    def job_states(self, ids: Sequence[UUID]) -> dict[UUID, str]:
        states = postgres_standing.job_states(self.using, ids)
        missing = [i for i in ids if i not in states]
        if missing:  # HIST-04: a finished job moved to the history has its final state there
            from ...models import JobHistory

            rows = JobHistory.objects.using(self.using).filter(id__in=missing)
            states.update(rows.values_list("id", "state"))
        return states

    def live_versions(self) -> list[VersionCount]:
        from django.db.models import Case, Count, IntegerField, Q, Value, When

        from ...models import Job
        from ...states import LIVE_STATES

        # a run first claimed before runs recorded their version reads as 1 (migration 0029)
        shown = Case(
            When(version__isnull=True, started_at__isnull=False, then=Value(1)),
            default="version",
            output_field=IntegerField(),
        )
        rows = (
            Job.objects.using(self.using)
            .filter(state__in=LIVE_STATES)
            .annotate(shown=shown)
            .values("name", "shown")
            .annotate(
                running=Count("id", filter=Q(state="running")),
                waiting=Count("id", filter=~Q(state="running") & Q(parked=False)),
                parked=Count("id", filter=Q(parked=True)),
            )
        )
        counts = [
            VersionCount(r["name"], r["shown"], r["running"], r["waiting"], r["parked"])
            for r in rows
        ]
        return sorted(counts, key=_by_version)


def _with_dead(stats: list[QueueStats], dead: Mapping[str, int]) -> list[QueueStats]:
    """``stats`` with the history's dead counted in, a queue with only those too."""
    from dataclasses import replace

    by_queue = {s.queue: s for s in stats}
    for queue, n in dead.items():
        s = by_queue.get(queue) or QueueStats(queue, 0, 0, 0, 0, 0, 0.0)
        by_queue[queue] = replace(s, dead=s.dead + n)
    return [by_queue[q] for q in sorted(by_queue)]


def _by_version(count: VersionCount) -> tuple[str, int]:
    return count.name, -1 if count.version is None else count.version
