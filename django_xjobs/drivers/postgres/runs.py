"""The PostgreSQL driver's verbs on a run: its claim, its settles and its worker's presence."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ... import history
from ...limits.claims import ClaimLimits
from ...payload import dumps
from ...rollup import BOUNDS as ROLLUP_BOUNDS
from ..contract import (
    NO_VERSIONS,
    ClaimedJob,
    Complete,
    DeclaredVersions,
    Finish,
    Presence,
    RetryAt,
    Settle,
    Shed,
    SuspendUntil,
    claimed_input,
)
from ..rules import (
    check_claim_args,
)
from . import limits as postgres_limits
from .listener import Listener, Polling, listen_alias

if TYPE_CHECKING:
    pass
from .state import CHANNEL, CONTROL_CHANNEL, PostgresState

_LAPSED_JSON = history.LAPSED.to_json()
_LAPSED_PRESENT_JSON = history.LAPSED_PRESENT.to_json()
_EXITED_JSON = history.EXITED.to_json()
_BOUNDS = list(ROLLUP_BOUNDS)
#: a claimed row's creation time arrives as microseconds since this instant (claimed_columns)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _history(failure: history.Failure | None) -> dict[str, Any]:
    return {"failure": None if failure is None else failure.to_json(), "keep": history.KEEP}


def _claimed(r: tuple[Any, ...]) -> ClaimedJob:
    """One row of ``claim`` as a run; its input decoded here, on its own (``claimed_input``)."""
    inputs, undecodable = claimed_input(r[4])
    return ClaimedJob(
        id=r[0],
        run_id=r[1],
        name=r[2],
        queue=r[3],
        input=inputs,
        attempt=r[5],
        max_attempts=r[6],
        lease_token=r[7],
        priority=r[8],
        tenant_id=r[9],
        enqueued_by=r[10],
        idempotency_key=r[11],
        created_at=_EPOCH + timedelta(microseconds=r[12]),  # the claim sends microseconds
        lease_expiries=r[13],
        traceparent=r[14],
        undecodable=undecodable,
        expired=bool(r[15]),
        snoozes=r[16],
        died_with=r[17],
        version=1 if r[18] is None else r[18],
        waited=float(r[19]),
    )


class PostgresRuns(PostgresState):
    """``RunStore`` on ``jobs.sql``: every write but the claim fenced on ``running`` and the token."""

    def claim(
        self,
        *,
        queues: Sequence[str],
        limit: int,
        visibility_timeout: float,
        worker_id: str,
        lapsed: bool = True,
        limits: ClaimLimits | None = None,
        versions: DeclaredVersions | None = None,
        paused: frozenset[str] = frozenset(),
    ) -> list[ClaimedJob]:
        check_claim_args(queues, limit, visibility_timeout)
        declared = (versions or NO_VERSIONS).json
        stepped = sorted(paused)  # SPEC PAUSE-04/05: none, an empty array
        if limits is not None:  # declared limits: decided in their own statements
            args = (queues, limit, visibility_timeout, worker_id, lapsed)
            return [_claimed(r) for r in self._claim_limited(*args, limits, declared, stepped)]
        params: dict[str, Any] = {
            "queues": list(queues),
            "limit": limit,
            "worker_id": worker_id,
            "visibility_timeout": visibility_timeout,
            "versions": declared,
            "paused": stepped,
        }
        if lapsed:
            params.update(
                lapsed=_LAPSED_JSON,
                lapsed_present=_LAPSED_PRESENT_JSON,
                exited=_EXITED_JSON,
                keep=history.KEEP,
            )
        statement = "claim_lapsed" if lapsed else "claim"
        # only a claim told of a pause tests its rows against one (jobs.sql's paused_rows)
        rows = self._run(statement + "_paused" if stepped else statement, params)
        # already in claim order: the statement sorts
        return [_claimed(r) for r in rows]

    def _claim_limited(
        self,
        queues: Sequence[str],
        limit: int,
        visibility_timeout: float,
        worker_id: str,
        lapsed: bool,
        limits: ClaimLimits,
        versions: str,
        paused: list[str],
    ) -> list[tuple[Any, ...]]:
        return postgres_limits.claim(
            self.using,
            queues=queues,
            limit=limit,
            visibility_timeout=visibility_timeout,
            worker_id=worker_id,
            lapsed=lapsed,
            limits=limits,
            versions=versions,
            cursor=self._limit_cursor,
            paused=paused,
        )

    def complete(self, completes: Sequence[Complete]) -> set[UUID]:
        if not completes:
            return set()
        rows = self._run(
            "complete",
            {
                "ids": [c.job_id for c in completes],
                "tokens": [c.lease_token for c in completes],
                "results": [c.result_json for c in completes],
                "bounds": _BOUNDS,
            },
        )
        return {r[0] for r in rows}

    def retry(self, retry: RetryAt) -> bool:
        params = {
            "delay": max(0.0, retry.delay),
            "counts_as_attempt": retry.counts_as_attempt,
            "error": retry.error,
            "stop_reason": retry.stop_reason,
            "crashed": retry.crashed,
            "keep_place": retry.keep_place,
            # a hand-back that spends no attempt is no end of a run: not counted
            "outcome": "retried" if retry.counts_as_attempt else None,
            "bounds": _BOUNDS,
            **_history(retry.failure),
        }
        return self._fenced("retry", retry, params)

    def suspend(self, suspend: SuspendUntil) -> bool:
        if suspend.children:  # a call step: its own statement, the plain one as it was
            params = {
                "delay": max(0.0, suspend.delay),
                "error": suspend.error,
                "children": sorted(suspend.children),
            }
            return self._fenced("suspend_children", suspend, params)
        params = {
            "delay": max(0.0, suspend.delay),
            "error": suspend.error,
            "snoozed": suspend.snoozed,
            "parked": suspend.parked,
            **_history(suspend.failure),
        }
        return self._fenced("suspend", suspend, params)

    def shed(self, shed: Shed) -> bool:
        return self._fenced(
            "shed", shed, {"delay": max(0.0, shed.delay), "keep_place": shed.keep_place}
        )

    def finish(self, finish: Finish) -> bool:
        params = {
            "state": finish.state,
            "error": finish.error,
            "stop_reason": finish.stop_reason,
            "bounds": _BOUNDS,
            **_history(finish.failure),
        }
        return self._fenced("finish", finish, params)

    def _fenced(self, statement: str, value: Settle, params: Mapping[str, object]) -> bool:
        fence = {"id": value.job_id, "lease_token": value.lease_token}
        return self._count(statement, {**fence, **params}) == 1

    def restart(
        self, job_id: UUID, lease_token: UUID, version: int, entry: history.Failure
    ) -> bool:
        params = {"id": job_id, "lease_token": lease_token, "version": version}
        [(restarted,)] = self._run("restart_run", {**params, **_history(entry)})
        return bool(restarted)

    def progress(self, job_id: UUID, lease_token: UUID, progress: Mapping[str, object]) -> bool:
        params = {"id": job_id, "lease_token": lease_token, "progress": dumps(progress)}
        return self._count("progress", params) == 1

    def heartbeat(self, job_id: UUID, lease_token: UUID, visibility_timeout: float) -> bool:
        params = {
            "id": job_id,
            "lease_token": lease_token,
            "visibility_timeout": visibility_timeout,
        }
        return self._count("heartbeat", params) == 1

    def renew_presence(self, presence: Presence, ttl: float) -> None:
        params = {
            "id": presence.worker_id,
            "host": presence.host,
            "pid": presence.pid,
            "queues": json.dumps(list(presence.queues)),
            "in_flight": presence.in_flight,
            "ttl": ttl,
        }
        self._count("renew_presence", params)

    def release_presence(self, worker_id: str) -> None:
        self._count("release_presence", {"id": worker_id})

    def stop_presence(self, worker_id: str) -> None:
        self._count("stop_presence", {"id": worker_id})

    # --- wake-ups ---------------------------------------------------------------------------

    def notify_on_ready(
        self,
        queues: Iterable[str],
        callback: Callable[[], None],
        on_control: Callable[[], None] | None = None,
        on_urgent: Callable[[str, int], None] | None = None,
    ) -> Listener | Polling:
        alias = listen_alias(self.using, CHANNEL)  # behind a transaction pooler: maybe none
        if alias is None:
            return Polling()
        controls = None if on_control is None else (CONTROL_CHANNEL, on_control)
        listener = Listener(
            alias, CHANNEL, callback, set(queues), controls=controls, urgent=on_urgent
        )
        listener.start()
        return listener
