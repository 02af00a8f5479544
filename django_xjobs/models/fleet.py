"""The fleet and its standing orders: workers' presence, fleet concurrency slots, the
scheduler's watermarks and leader, an operator's orders for a queue or a cron, and each limit
key's state."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now

from .fields import PgArrayField


class Worker(models.Model):
    """A worker process's presence, renewed with its heartbeat on the database clock."""

    id = models.TextField(primary_key=True)
    host = models.TextField()
    pid = models.IntegerField()
    queues = models.JSONField(default=list)
    started_at = models.DateTimeField(db_default=Now())
    last_seen = models.DateTimeField(db_default=Now())
    #: the start of the current run of beats with no gap a lease could have lapsed in
    seen_since = models.DateTimeField(db_default=Now())
    expires_at = models.DateTimeField(help_text="Past this without a beat the worker has lapsed.")
    in_flight = models.IntegerField(db_default=0)
    #: set when the process exited past --shutdown-timeout with runs still in flight: its row
    #: says so instead of lapsing, and those runs' lapses are judged as its exit
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "x_workers"
        ordering = ["started_at"]

    def __str__(self) -> str:
        return f"{self.id} ({self.host}:{self.pid})"


class JobLease(models.Model):
    """A fleet concurrency slot (SPEC §14 x_job_leases); unique on (lease_key, slot)."""

    id = models.BigAutoField(primary_key=True)
    lease_key = models.TextField()
    slot = models.IntegerField()
    holder = models.TextField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "x_job_leases"
        constraints = [
            models.UniqueConstraint(fields=["lease_key", "slot"], name="x_job_leases_key_slot_key")
        ]
        indexes = [models.Index(fields=["expires_at"], name="x_job_leases_expiry_idx")]

    def __str__(self) -> str:
        return f"{self.lease_key}#{self.slot}"


class SchedulerState(models.Model):
    task_name = models.TextField(primary_key=True)
    last_fired_at = models.DateTimeField()
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "x_scheduler_state"

    def __str__(self) -> str:
        return self.task_name


class SchedulerLeader(models.Model):
    lock_key = models.TextField(primary_key=True)
    holder = models.TextField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "x_scheduler_leader"

    def __str__(self) -> str:
        return f"{self.lock_key}: {self.holder}"


class QueueControl(models.Model):
    """An operator's standing orders for one queue, fleet-wide: stored, so a restart or a deploy
    keeps them. Workers read the paused set when told it changed and once a poll, never in a
    claim; a worker never writes here (stopping, crashing or draining pauses nothing)."""

    queue = models.TextField(primary_key=True)
    paused_at = models.DateTimeField(null=True, blank=True, help_text="Paused since; null: not.")
    paused_by = models.TextField(null=True, blank=True, help_text="Who paused it, when known.")
    paused_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The pause ends by itself then (pause_queue(until=)); null: until resumed.",
    )
    concurrency = models.IntegerField(
        null=True, blank=True, help_text="Runs at most this many at once, fleet-wide; null: no cap."
    )
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "x_queue_controls"
        ordering = ["queue"]

    def __str__(self) -> str:
        return f"{self.queue} ({'paused' if self.paused_at else 'running'})"


class JobControl(models.Model):
    """An operator's pause of one job name, or of one of its limit keys (``pause_jobs``): stored,
    so a restart or a deploy keeps it. Workers read the pauses in force when told they changed
    and once a poll, and their claims step over the runs they hold back; a worker never writes
    here. A key's pause with an end is the key's own (``x_limit_keys.paused_until``, the pause a
    ``RateLimited`` takes); a row here is the pause of a whole job, with or without an end, or
    of a key until resumed."""

    #: the job name, or the key as ``limits/keys.py`` renders it (name, separator, key)
    target = models.TextField(primary_key=True)
    name = models.TextField(help_text="The job paused.")
    limit_key = models.TextField(
        null=True, blank=True, help_text="Its rendered limit key paused; null: the whole job."
    )
    paused_at = models.DateTimeField(db_default=Now(), help_text="Paused since.")
    paused_by = models.TextField(null=True, blank=True, help_text="Who paused it, when known.")
    paused_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The pause ends by itself then (pause_jobs(until=)); null: until resumed.",
    )
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "x_job_controls"
        ordering = ["target"]

    def __str__(self) -> str:
        return self.name if self.limit_key is None else f"{self.name}[{self.limit_key}]"


class CronControl(models.Model):
    """An operator's standing orders for one cron: stored, so a restart or a deploy keeps them.
    The scheduler's leader reads the paused set once a round; a paused cron's watermark stays
    where it was, so on resume its missed occurrences follow its ``catch_up`` rule."""

    cron = models.TextField(primary_key=True)
    paused_at = models.DateTimeField(null=True, blank=True, help_text="Paused since; null: not.")
    paused_by = models.TextField(null=True, blank=True, help_text="Who paused it, when known.")
    #: the key of the latest "run now": a second request with the same key (a double click)
    #: finds it here and enqueues nothing
    run_key = models.TextField(null=True, blank=True)
    run_at = models.DateTimeField(null=True, blank=True, help_text="The latest run now.")
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "x_cron_controls"
        ordering = ["cron"]

    def __str__(self) -> str:
        return f"{self.cron} ({'paused' if self.paused_at else 'running'})"


class LimitKey(models.Model):
    """One fleet-wide limit key's state (limits/worker.py): locked by the claim that
    takes its runs, so two workers never count its budget at once. Its running count is not
    stored: it is the key's running rows, so a crashed worker's slot frees when its lease lapses
    and the run is taken again or ends."""

    key = models.TextField(primary_key=True)
    starts = PgArrayField(
        models.DateTimeField(),
        null=True,
        blank=True,
        help_text="Start times still inside the key's rate window, oldest first; null: none.",
    )
    paused_until = models.DateTimeField(
        null=True, blank=True, help_text="No run of the key starts before this (RateLimited)."
    )
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "x_limit_keys"
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key
