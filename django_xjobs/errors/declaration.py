"""What a declaration or an enqueue's input gets wrong: raised when the module declaring a job
is imported, or at the call, before anything is stored. ``JobDefinitionError`` and the
declaration errors ``JobDefinitionError.of`` makes of the other rules are here."""

from __future__ import annotations

import threading
from typing import ClassVar

from .base import PUBLIC, XJobsError


class InvariantError(XJobsError):
    """An argument broke a rule of the API."""

    code = "X_INVARIANT"


class DurationInvalidError(XJobsError):
    """A duration could not be read."""

    code = "X_DURATION_INVALID"
    default_hint = 'use a timedelta, a number of seconds, or a string such as "500ms", "30s", "5m", "2h30m", "3d"'


class JobDefinitionError(XJobsError):
    """A job, cron or backfill declaration is invalid; raised when the module defining it is
    imported.

    It is never raised as itself: each rule raises its own subclass, with its own ``code``
    (``CronInvalidError``, ``IdempotencyRequiredError``, ...). A rule that has a class of its
    own outside declarations is raised as a class that is both, from ``JobDefinitionError.of``:
    a bad duration in ``@job(timeout=...)`` is a ``DurationInvalidDefinitionError``, which
    ``except JobDefinitionError`` and ``except DurationInvalidError`` both catch.
    """

    _of: ClassVar[dict[type[XJobsError], type[JobDefinitionError]]] = {}
    _of_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(cls, rule: type[XJobsError]) -> type[JobDefinitionError]:
        """The declaration error for ``rule``: a subclass of both this class and ``rule``,
        carrying ``rule``'s code, named ``<Rule>DefinitionError`` (``InvariantError`` gives
        ``InvariantDefinitionError``). The same class on every call; for the rules of the
        package it is an attribute of ``django_xjobs.errors``, so an instance pickles by
        reference."""
        if issubclass(rule, JobDefinitionError):
            return rule
        with cls._of_lock:
            made = cls._of.get(rule)
            if made is None:
                name = rule.__name__.removesuffix("Error") + "DefinitionError"
                doc = f"A declaration broke the rule of ``{rule.__name__}`` (``{rule.code}``)."
                body = {"code": rule.code, "__doc__": doc, "__module__": PUBLIC}
                made = cls._of[rule] = type(name, (JobDefinitionError, rule), body)
            return made


class CronInvalidError(JobDefinitionError):
    """A cron's schedule cannot be read or never fires, or ``@cron`` was put where it cannot
    work."""

    code = "X_CRON_INVALID"


class IdempotencyRequiredError(JobDefinitionError):
    """A job was declared without an ``idempotency_key``."""

    code = "X_IDEMPOTENCY_REQUIRED"


class JobVersionInvalidError(JobDefinitionError):
    """A job declared a ``version`` that is not a whole number from 1 up, or an ``old_runs``
    policy it does not know."""

    code = "X_JOB_VERSION_INVALID"
    default_hint = (
        'version= counts from 1 and goes up by one each change of the steps; old_runs= is "replay", '
        '"restart" or "park"'
    )


class InputInvalidError(XJobsError):
    """Job inputs do not fit the handler's signature or are not JSON."""

    code = "X_INPUT_INVALID"


class PayloadTooLargeError(XJobsError):
    """A payload is larger than the configured cap."""

    code = "X_PAYLOAD_TOO_LARGE"
    default_hint = 'store large data elsewhere and pass its id, or raise XJOBS["MAX_PAYLOAD_BYTES"]'


class QueueUnknownError(XJobsError):
    """A queue name is not declared by any job nor listed in XJOBS["QUEUES"]."""

    code = "X_QUEUE_UNKNOWN"


class ConfigInvalidError(XJobsError):
    """The XJOBS setting is invalid."""

    code = "X_CONFIG_INVALID"


class JobDuplicateError(XJobsError):
    """A live job already holds this idempotency key."""

    code = "X_JOB_DUPLICATE"


class JobTenantRequiredError(XJobsError):
    """A tenant-scoped job was declared or enqueued without a way to get its tenant."""

    code = "X_JOB_TENANT_REQUIRED"


class InvariantDefinitionError(JobDefinitionError, InvariantError):
    """A declaration broke a rule of the API: ``concurrency=0``, a bad backfill ``batch=``, ..."""

    code = "X_INVARIANT"


class JobDuplicateDefinitionError(JobDefinitionError, JobDuplicateError):
    """Two jobs (or two crons, two backfills) declare one name."""

    code = "X_JOB_DUPLICATE"


class JobTenantRequiredDefinitionError(JobDefinitionError, JobTenantRequiredError):
    """A job's ``tenant=`` is neither a callable nor ``"required"``."""

    code = "X_JOB_TENANT_REQUIRED"


JobDefinitionError._of.update(
    {
        InvariantError: InvariantDefinitionError,
        JobDuplicateError: JobDuplicateDefinitionError,
        JobTenantRequiredError: JobTenantRequiredDefinitionError,
    }
)
