"""The roots every error of the package stands on (``XJobsError``, ``JobInterrupt``) and the
text of an error, in one place (``describe_error``, ``first_line``)."""

from __future__ import annotations

import copy
from typing import ClassVar, Literal, Self

#: where every error of the package is named (``django_xjobs.errors.<Name>``) wherever it is
#: defined: its pickles, a stored failure's class path and the reference all name it so
PUBLIC = __name__.rpartition(".")[0]

RetryKind = Literal["terminal", "retryable", "retry-after"]


class _Coded(BaseException):
    """The shared shape of every error: ``code``, ``message``, ``hint`` and free ``meta``."""

    #: the class's code; an app's own ``code=`` sets it on the instance (not a ClassVar, so it may)
    code: str = "X_INVARIANT"
    default_hint: ClassVar[str] = ""
    #: A declared classification (SPEC CLASS-03): ``None`` means the backoff path decides.
    retry: ClassVar[RetryKind | None] = None

    def __init__(
        self,
        message: str | None = None,
        *,
        hint: str | None = None,
        code: str | None = None,
        **meta: object,
    ) -> None:
        # ``code=`` is an app's own code on its own error (``XJobsError(..., code="APP_DECLINED")``,
        # classified by register_error_retry); this package raises each of its codes with the
        # class that owns it (tests/project/test_boundaries.py holds it to that).
        if code is not None:
            self.code = code
        self.message = message or (type(self).__doc__ or self.code).strip().splitlines()[0]
        self.hint = self.default_hint if hint is None else hint
        self.meta = meta
        super().__init__(str(self))

    def prefixed(self, prefix: str) -> Self:
        """A copy of this error whose message starts with ``prefix``: the same class, code,
        hint and meta (``inputs[3]: ...`` names the input of a batch that broke a rule)."""
        copied = copy.copy(self)
        copied.message = f"{prefix}{self.message}"
        copied.args = (str(copied),)
        return copied

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        return f"{text} — {self.hint}" if self.hint else text


class XJobsError(_Coded, Exception):
    """A django_xjobs operation failed.

    Every error an operation raises is one: ``code`` names the rule (``X_INPUT_INVALID``),
    ``message`` says what happened, ``hint`` says the fix, and ``str(error)`` starts with the
    code. Catch it by class, or by code::

        try:
            send_receipt.enqueue(order_id=order.pk)
        except XJobsError as error:
            if error.code != "X_PAYLOAD_TOO_LARGE":
                raise
    """


class JobInterrupt(_Coded):
    """A run was told to stop.

    Not an ``Exception``: a handler's ``except Exception`` must not swallow a cancellation or a
    lost lease, or the run would go on writing after it stopped owning the job.
    """


def describe_error(error: BaseException) -> str:
    """How an error reads in ``last_error``, a step record or a log: the code first for ours,
    else the exception's type and message."""
    if isinstance(error, XJobsError | JobInterrupt):
        return str(error)
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def first_line(error: BaseException) -> str:
    """The first line of an error's message (a database error's can run to many)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
