"""The errors the task API raises: each is both the class Django's reference backends raise for
the same mistake and an ``XJobsError`` with a code and a hint."""

from __future__ import annotations

from ..errors import (
    ConfigInvalidError,
    InputInvalidError,
    InvariantError,
    JobNotFoundError,
    QueueUnknownError,
)
from .api import InvalidTask, InvalidTaskBackend, TaskResultDoesNotExist

# Code written against Django's docs catches Django's classes (TypeError for an argument JSON
# cannot hold, InvalidTask, TaskResultDoesNotExist...); ours carry a code and a hint. Each error
# the task API raises here is both: the class Django's reference backends raise for the same
# mistake, and an XJobsError.


class TaskArgumentTypeError(InputInvalidError, TypeError):
    """A task argument of a type JSON cannot hold (Django raises ``TypeError``)."""


class TaskArgumentValueError(InputInvalidError, ValueError):
    """A task argument whose value JSON (or PostgreSQL's ``jsonb``) cannot hold: bytes that are
    not UTF-8 (Django raises ``ValueError``), a NaN, a NUL character."""


class TaskInvalidError(InvariantError, InvalidTask):
    """A task this backend cannot run as given (Django raises ``InvalidTask``)."""


class TaskQueueUnknownError(QueueUnknownError, InvalidTask):
    """A task's queue is not one its backend's ``QUEUES`` lists (Django: ``InvalidTask``)."""


class TaskResultNotFoundError(JobNotFoundError, TaskResultDoesNotExist):
    """No task result under this id in this backend (Django: ``TaskResultDoesNotExist``)."""


class TaskBackendConfigError(ConfigInvalidError, InvalidTaskBackend):
    """A ``TASKS`` alias's ``OPTIONS`` is wrong (Django: ``InvalidTaskBackend``, an
    ``ImproperlyConfigured``)."""
