"""Every job in the Django admin: why it stopped, its step timeline, and the operator actions.

Rows are read-only; retry and cancel go through ``django_xjobs.operations``, the same path as
``manage.py xjobs`` and the tests. Beside the job list (``/admin/django_xjobs/job/``):

* ``job/queues/``: depth per queue from ``inspect_queues()``, with the outbox, fleet slots and
  scheduler leader at a glance, and how many suspended rows are parked unknown job names;
* ``job/?unknown=parked``: rows parked because no process registers their job name;
* ``job/?state__exact=dead``: the dead letters, linked from every page as "Dead letters (N)";
* ``job/crons/``: every cron with its schedule and policy, last firing, next run and the leader;
* ``outboxentry/``, ``joblease/``, ``schedulerstate/``: the staged rows, the fleet slots held
  and the scheduler's watermarks, view-only;
* ``worker/``: every worker process, its runs in flight and whether it is alive or lapsed;
* ``backfill/``: every backfill pass in the ledger, its progress and its name's history;
* ``operatoraction/``: the operators' audit trail, read-only (its own view permission).
* ``jobevent/``: every stored event and what its publish did, its data as a payload.
* ``jobhistory/``: the finished jobs ``XJOBS["HISTORY"]`` moved out of x_jobs (issue 46).

Each page lives in its own module (``jobs``, ``actions``, ``trace``, ``outbox``, ``leases``,
``workers``, ``backfill``, ``batches``, ``events``, ``overview``, ``audit``, ``history``); this one registers
them on the site.
"""

from __future__ import annotations

from django.contrib import admin

from ..models import (
    Backfill,
    Job,
    JobBatch,
    JobEvent,
    JobHistory,
    JobLease,
    OperatorAction,
    OutboxEntry,
    Overview,
    SchedulerState,
    Worker,
)
from .audit import OperatorActionAdmin
from .backfill import BackfillAdmin
from .batches import JobBatchAdmin
from .events import JobEventAdmin
from .history import JobHistoryAdmin
from .jobs import SHORT_ERROR, JobAdmin, StateFilter, UnknownJobFilter
from .leases import JobLeaseAdmin, LeaseLiveFilter, SchedulerStateAdmin
from .outbox import OutboxEntryAdmin, OutboxStatusFilter
from .overview import OverviewEntry
from .workers import WorkerAdmin

__all__ = [
    "SHORT_ERROR",
    "BackfillAdmin",
    "JobAdmin",
    "JobBatchAdmin",
    "JobEventAdmin",
    "JobHistoryAdmin",
    "JobLeaseAdmin",
    "LeaseLiveFilter",
    "OperatorActionAdmin",
    "OutboxEntryAdmin",
    "OutboxStatusFilter",
    "OverviewEntry",
    "SchedulerStateAdmin",
    "StateFilter",
    "UnknownJobFilter",
    "WorkerAdmin",
]

admin.site.register(Overview, OverviewEntry)
admin.site.register(Job, JobAdmin)
admin.site.register(OutboxEntry, OutboxEntryAdmin)
admin.site.register(JobLease, JobLeaseAdmin)
admin.site.register(Worker, WorkerAdmin)
admin.site.register(SchedulerState, SchedulerStateAdmin)
admin.site.register(Backfill, BackfillAdmin)
admin.site.register(JobBatch, JobBatchAdmin)  # issue 32
admin.site.register(OperatorAction, OperatorActionAdmin)  # issue 45
admin.site.register(JobEvent, JobEventAdmin)  # issue 43
admin.site.register(JobHistory, JobHistoryAdmin)  # issue 46
