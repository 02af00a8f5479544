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
    pass
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
        from ...models import Job

        row = Job.objects.using(self.using).filter(pk=job_id).first()
        return None if row is None else snapshot(row)

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
        from django.db.models import Q

        from ...models import Job

        rows = Job.objects.using(self.using).all()
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
        from ...models import Job

        rows = Job.objects.using(self.using).filter(id__gte=low, id__lte=high).order_by("id")
        return list(rows.values_list("id", flat=True)[:limit])

    def dead_letters(self, *, limit: int = 100) -> list[JobSnapshot]:
        from ...models import Job

        rows = Job.objects.using(self.using).filter(state="dead").order_by("-updated_at", "-id")
        return [snapshot(r) for r in rows[:limit]]

    def standing(self, job_id: UUID, *, cap: int, fair: bool = False) -> Standing | None:
        return postgres_standing.standing(self.using, job_id, cap=cap, fair=fair)

    def job_states(self, ids: Sequence[UUID]) -> dict[UUID, str]:
        return postgres_standing.job_states(self.using, ids)

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


def _by_version(count: VersionCount) -> tuple[str, int]:
    return count.name, -1 if count.version is None else count.version
