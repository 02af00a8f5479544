"""The driver's verbs on a run: everything a worker writes, from its claim to its settle, and
its presence."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from ...history import Failure
from .records import Presence
from .requests import ClaimedJob, DeclaredVersions
from .settles import Complete, Finish, RetryAt, Shed, SuspendUntil
from .stores import Notifier

if TYPE_CHECKING:
    from ...limits.claims import ClaimLimits


class RunStore(Protocol):
    """A claimed run's writes. Every one but the claim is fenced on ``state='running'`` and the
    run's lease token: a row that moved on refuses it."""

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
        """Lock and take up to ``limit`` due rows (and, with ``lapsed``, running rows whose
        lease lapsed), each with a fresh lease token that fences every later write; priority,
        then run_at order. A lapsed run's holder is judged from its presence (SPEC LEASE-16):
        a run that died with it is marked (``died_with``), never counted.
        ``lapsed=False`` is the cheaper claim a worker makes between its lapsed-lease sweeps.
        With ``limits``, only runs within them (limits/claims.py): a key's runs at once
        and starts per window, a key's pause, a queue's cap (SPEC LIMIT-10..16). With
        ``versions``, only runs whose version the worker honours, each stamped at its first
        claim with the version it declares (SPEC VER-02, VER-05, VER-08). ``paused``: the
        targets of the operators' job pauses (``job_pauses``), a job name or a rendered limit
        key each: no waiting run of such a job or key is taken (SPEC PAUSE-04, PAUSE-05)."""

    # settling a claimed run: one call per settle value, each fenced on 'running' and its token
    def complete(self, completes: Sequence[Complete]) -> set[UUID]:
        """Every run held by its token becomes ``done``, in one statement; the ids that did."""

    def retry(self, retry: RetryAt) -> bool:
        """Ready again at now + delay; the failure joins the history in the same write."""

    def suspend(self, suspend: SuspendUntil) -> bool:
        """Suspended until now + delay, the attempt given back."""

    def shed(self, shed: Shed) -> bool:
        """Ready again at now + delay (or in its old place), the attempt given back, the crash
        count kept."""

    def finish(self, finish: Finish) -> bool:
        """Dead or failed for good; the failure joins the history in the same write."""

    def restart(self, job_id: UUID, lease_token: UUID, version: int, entry: Failure) -> bool:
        """A worker of a newer version starts an older run again (``old_runs="restart"``, SPEC
        VER-07): the run's stored steps are deleted, it takes ``version``, and ``entry`` joins its
        history, in one write fenced on 'running' and the token; False when it no longer holds
        the run."""

    def progress(self, job_id: UUID, lease_token: UUID, progress: Mapping[str, object]) -> bool:
        """Store the run's progress (``done``, ``total``, ``note``) stamped ``at`` the store's
        now, only while 'running' under this token; False when the run no longer holds it."""

    def heartbeat(self, job_id: UUID, lease_token: UUID, visibility_timeout: float) -> bool:
        """Extend the lease to now + visibility_timeout, only while 'running' under this token;
        False when the run no longer holds the job (lapsed, re-claimed or cancelled)."""

    # worker presence: one statement per beat for the worker, never per job
    def renew_presence(self, presence: Presence, ttl: float) -> None:
        """Upsert the worker's row: seen now, alive until now + ttl; a beat later than ttl / 2
        after the last one (or from a new process) starts a new unbroken streak."""

    def release_presence(self, worker_id: str) -> None:
        """Delete the worker's row (a clean stop)."""

    def stop_presence(self, worker_id: str) -> None:
        """The process exits past its shutdown timeout with runs in flight: its row stays,
        marked stopped and lapsed, and a lapse of its runs is recorded as that exit."""

    def notify_on_ready(
        self,
        queues: Iterable[str],
        callback: Callable[[], None],
        on_control: Callable[[], None] | None = None,
        on_urgent: Callable[[str, int], None] | None = None,
    ) -> Notifier:
        """Call ``callback`` (ids never payloads) when a row becomes ready on ``queues``, and
        ``on_control`` when an operator paused or resumed a queue (and once on listening, for
        what it missed); polling stays the fallback, so a lost notification only delays.
        ``on_urgent(queue, priority)`` is told of a row enqueued ready above priority 0, besides
        ``callback`` (SPEC PRIO-01)."""
