"""The operator API: look at jobs and queues, cancel a job, run a finished one again.

The admin, the ``xjobs`` management command and the tests all go through these functions, never
around them (DESIGN §3). Each looks the driver up when it is called, takes a job id as a
``UUID`` or a string, and answers a frozen value of ``answers`` (``JobTrace``, ``QueuesReport``,
...) that reads as plain JSON too: ``trace["state"]`` is ``trace.state``, and ``to_json()`` is
the document, ids and times as strings, durations in seconds.

The calls live by what they act on: ``jobs`` (a job's trace, cancel, retry, run now, the dead
letters, prune), ``bulk`` (retry, cancel, delete and requeue every job a filter admits),
``audit`` (the trail every action leaves), ``fleet`` (queues and workers), ``outbox``,
``events``, ``cron_controls``, ``manifest``, ``why``, ``versions`` and ``history`` (the
finished jobs' days); every public name is here
too, so ``from django_xjobs.operations import inspect_job`` keeps working.
"""

from __future__ import annotations

from .audit import inspect_action, inspect_audit, prune_audit
from .background import BulkStarted, act_on_matching
from .bulk import cancel_jobs, delete_jobs, requeue_jobs, retry_jobs
from .encryption import KeyRotation, rotate_keys
from .events import inspect_event, list_events
from .filters import job_filter
from .fleet import (
    inspect_queues,
    inspect_workers,
    pause_queue,
    resume_queue,
    worker_state,
)
from .history import history_partitions
from .jobs import (
    PRUNE_DEFAULT_STATES,
    RETRY_COMMAND,
    cancel_job,
    collapsed_into,
    inspect_dead_letters,
    inspect_job,
    key_shown,
    list_jobs,
    prune_jobs,
    retry_job,
    run_job_now,
)
from .manifest import inspect_manifest
from .moves import QueueMove, move_queue
from .outbox import discard_outbox_entry, inspect_outbox, retry_outbox_entry
from .shared import HEX_DIGITS, MIN_PREFIX, PREFIX_CANDIDATES, check_by
from .tenants import TenantErasure, erase_tenant
from .versions import inspect_versions

__all__ = [
    "HEX_DIGITS",
    "MIN_PREFIX",
    "PREFIX_CANDIDATES",
    "PRUNE_DEFAULT_STATES",
    "RETRY_COMMAND",
    "BulkStarted",
    "KeyRotation",
    "QueueMove",
    "TenantErasure",
    "act_on_matching",
    "cancel_job",
    "cancel_jobs",
    "check_by",
    "collapsed_into",
    "delete_jobs",
    "discard_outbox_entry",
    "erase_tenant",
    "history_partitions",
    "inspect_action",
    "inspect_audit",
    "inspect_dead_letters",
    "inspect_event",
    "inspect_job",
    "inspect_manifest",
    "inspect_outbox",
    "inspect_queues",
    "inspect_versions",
    "inspect_workers",
    "job_filter",
    "key_shown",
    "list_events",
    "list_jobs",
    "move_queue",
    "pause_queue",
    "prune_audit",
    "prune_jobs",
    "requeue_jobs",
    "resume_queue",
    "retry_job",
    "retry_jobs",
    "retry_outbox_entry",
    "rotate_keys",
    "run_job_now",
    "worker_state",
]
