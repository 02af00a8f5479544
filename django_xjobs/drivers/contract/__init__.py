"""The driver contract: what a job store must do, and the values that cross it (SPEC §15), a
module per verb family. Every name is re-exported here, so ``from ..drivers.contract import X``
is the one import wherever it is used.

- ``requests``: ``EnqueueRequest``, ``EnqueueResult``, ``ClaimedJob`` (what goes in and out);
- ``settles``: ``Complete``, ``RetryAt``, ``SuspendUntil``, ``Shed``, ``Finish`` (how a run ends);
- ``records``: the values the stores answer with (snapshots, figures, rows);
- ``jobs``, ``runs``, ``limits``: the verbs by family (``JobStore``, ``ReadStore``,
  ``RunStore``, ``LimitStore``, which holds the fleet slots too);
- ``stores``, ``outbox``, ``scheduler``: the other stores (steps, events, history, batches,
  backfills, the outbox, the scheduler);
- ``bulk``: ``JobFilter``, ``BulkAction``, ``BulkStore`` (an operator's verb on every job a
  filter admits) and ``AuditStore`` with its ``OperatorRecord`` (issue 45);
- ``driver``: ``JobDriver``, the protocol ``get_driver()`` answers with: one accessor per store
  (``get_driver().runs().claim(...)``) and ``close()``; and ``features``: ``DriverFeatures``,
  the flags it answers capability questions with.

Both drivers answer the same question the same way; the contract suite
(``tests/drivers/contract/``, a file per verb family) runs every case against each of them. The
rules both drivers apply live in ``drivers/rules.py``; PostgreSQL's parameter shaping in
``drivers/postgres/params.py``.
"""

from ...states import FINISHED_STATES, LIVE_STATES
from .bulk import (
    FILTER_FIELDS,
    AuditStore,
    BulkAction,
    BulkStore,
    BulkVerb,
    JobFilter,
    OperatorRecord,
)
from .driver import JobDriver
from .features import DriverFeatures
from .jobs import JobStore, ReadStore
from .limits import LimitStore
from .moves import MOVED_STATES, MoveHolds, MoveStore, MovingJob
from .outbox import OutboxStore, PublishTarget, QuarantineStore
from .payloads import ALIAS_PLACES, PAYLOAD_PLACES, PayloadStore, StoredPayload
from .records import (
    AGED,
    STEP_STATUSES,
    BackfillRecord,
    BatchCallback,
    BatchRecord,
    CronState,
    DepthSample,
    EventRecord,
    HistoryPartition,
    JobPause,
    JobSnapshot,
    KeyUse,
    OutboxRow,
    Presence,
    QuarantinedRow,
    QueueState,
    QueueStats,
    Standing,
    StepRecord,
    VersionCount,
    WorkerLoad,
    WorkerSnapshot,
)
from .requests import (
    NO_VERSIONS,
    ClaimedJob,
    DeclaredVersions,
    EnqueueRequest,
    EnqueueResult,
    claimed_input,
)
from .runs import RunStore
from .scheduler import LEADER_KEY, NotLeaderError, SchedulerStore
from .settles import Complete, FinalState, Finish, RetryAt, Settle, Shed, SuspendUntil
from .stores import (
    BackfillLedger,
    BatchStore,
    EventStore,
    HistoryStore,
    Notifier,
    StepStore,
)
from .tenants import TenantRows, TenantStore

__all__ = [
    "AGED",
    "ALIAS_PLACES",
    "FILTER_FIELDS",
    "FINISHED_STATES",
    "LEADER_KEY",
    "LIVE_STATES",
    "MOVED_STATES",
    "NO_VERSIONS",
    "PAYLOAD_PLACES",
    "STEP_STATUSES",
    "AuditStore",
    "BackfillLedger",
    "BackfillRecord",
    "BatchCallback",
    "BatchRecord",
    "BatchStore",
    "BulkAction",
    "BulkStore",
    "BulkVerb",
    "ClaimedJob",
    "Complete",
    "CronState",
    "DeclaredVersions",
    "DepthSample",
    "DriverFeatures",
    "EnqueueRequest",
    "EnqueueResult",
    "EventRecord",
    "EventStore",
    "FinalState",
    "Finish",
    "HistoryPartition",
    "HistoryStore",
    "JobDriver",
    "JobFilter",
    "JobPause",
    "JobSnapshot",
    "JobStore",
    "KeyUse",
    "LimitStore",
    "MoveHolds",
    "MoveStore",
    "MovingJob",
    "NotLeaderError",
    "Notifier",
    "OperatorRecord",
    "OutboxRow",
    "OutboxStore",
    "PayloadStore",
    "Presence",
    "PublishTarget",
    "QuarantineStore",
    "QuarantinedRow",
    "QueueState",
    "QueueStats",
    "ReadStore",
    "RetryAt",
    "RunStore",
    "SchedulerStore",
    "Settle",
    "Shed",
    "Standing",
    "StepRecord",
    "StepStore",
    "StoredPayload",
    "SuspendUntil",
    "TenantRows",
    "TenantStore",
    "VersionCount",
    "WorkerLoad",
    "WorkerSnapshot",
    "claimed_input",
]
