"""Which errors are worth retrying: the process-wide classification registry (SPEC CLASS-01..03).

Every error that fails an attempt is *classified* as one of three kinds, or left unclassified:

``"terminal"``
    It would fail the same way again: stop now and dead-letter the job, keeping the attempts
    left (SPEC CLASS-04, SE-17).
``"retryable"``
    Worth another attempt after the policy's backoff (the same path as an unclassified error).
``"retry-after"``
    Worth another attempt after the delay the error states (``error.retry_after``, seconds),
    capped by the policy's ``max_delay`` (SPEC CLASS-06).

An app declares a classification in one of three ways::

    register_error_retry({"PAYMENT_DECLINED": "terminal"})  # by the code of an XJobsError

    @retry_class("terminal")  # on its own exception class, any Exception subclass
    class CardDeclined(Exception): ...

    raise TerminalError("the API key was revoked")  # or RetryAfterError(..., retry_after=30)

Only a *declared* classification counts (SPEC SE-18): an error that merely claims
``retry = "terminal"`` on an undeclared code is unclassified, so it goes through the backoff
rather than dead-lettering a job by accident.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any, Final, TypeVar, cast, get_args

from .errors import ErrorRetryInvalidError, RetryKind, XJobsError

__all__ = ["KINDS", "RetryKind", "classify", "register_error_retry", "retry_class", "retry_for"]

#: The three classifications, in the order the docs list them.
KINDS: Final[tuple[RetryKind, ...]] = get_args(RetryKind)

#: SPEC CLASS-02: what the package declares. Fixed: an app cannot override these.
#: ``X_JOB_LEASE_LOST`` and ``X_JOB_SLOT_LOST`` are deliberately left unclassified.
BUILTIN: Final[Mapping[str, RetryKind]] = MappingProxyType(
    {
        "X_JOB_TIMEOUT": "retryable",
        "X_DRIVER_UNAVAILABLE": "retryable",
        "X_STEP_DUPLICATE": "terminal",
        "X_RESULT_INVALID": "terminal",
        "X_TERMINAL": "terminal",
        "X_JOB_CRASHED": "terminal",
        "X_BACKFILL_STALLED": "terminal",
        "X_BACKFILL_ENVIRONMENT": "terminal",
        "X_BACKFILL_APPLIED": "terminal",
        "X_RETRY_AFTER": "retry-after",
    }
)

#: The attribute ``retry_class`` sets on a class.
CLASS_ATTRIBUTE: Final = "__xjobs_retry__"

_KINDS_TEXT = ", ".join(f'"{kind}"' for kind in KINDS)
_lock = threading.Lock()
# Copy-on-write: a registration swaps in a new dict under the lock, so a reader (a worker
# thread classifying an error) reads one consistent mapping without taking the lock.
_registered: Mapping[str, RetryKind] = MappingProxyType({})

_E = TypeVar("_E", bound=type[BaseException])


def register_error_retry(mapping: Mapping[str, RetryKind]) -> None:
    """Declare how errors with these codes are retried (SPEC CLASS-01)::

        register_error_retry({"PAYMENT_DECLINED": "terminal", "RATE_LIMITED": "retry-after"})

    The registry is process-wide; call it at import time (an ``AppConfig.ready`` or the
    module that defines the errors). Every entry is checked before any is registered, so a
    refused call registers nothing. Registering the same kind again is a no-op; a different
    kind for a registered code, a different kind for a built-in code (SPEC CLASS-02), a kind
    that is not ``"terminal"``, ``"retryable"`` or ``"retry-after"``, or a code that is not a
    non-empty string raises ``ErrorRetryInvalidError`` (``X_ERROR_RETRY_INVALID``).
    """
    global _registered
    if not isinstance(mapping, Mapping):
        raise ErrorRetryInvalidError(
            f"register_error_retry() takes a mapping of code to kind, got {mapping!r}",
            hint='e.g. register_error_retry({"PAYMENT_DECLINED": "terminal"})',
        )
    entries = dict(mapping)
    with _lock:
        current = _registered
        for code, kind in entries.items():
            _check_entry(code, kind, current)
        added = {code: kind for code, kind in entries.items() if code not in BUILTIN}
        _registered = MappingProxyType({**current, **added})


def _check_entry(code: object, kind: object, current: Mapping[str, RetryKind]) -> None:
    if not isinstance(code, str) or not code.strip():
        raise ErrorRetryInvalidError(
            f"error code {code!r} must be a non-empty string",
            hint="use the code your error carries, e.g. XJobsError(..., code='PAYMENT_DECLINED')",
        )
    if kind not in KINDS:
        raise ErrorRetryInvalidError(
            f"{kind!r} (for {code!r}) is not a retry classification",
            hint=f"use one of {_KINDS_TEXT}",
        )
    builtin = BUILTIN.get(code)
    if builtin is not None and builtin != kind:
        raise ErrorRetryInvalidError(
            f"{code!r} is classified {builtin!r} by django_xjobs and cannot be changed to {kind!r}",
            hint="raise your own error with its own code (or a @retry_class exception) instead",
        )
    existing = current.get(code)
    if existing is not None and existing != kind:
        raise ErrorRetryInvalidError(
            f"{code!r} is already registered as {existing!r}, not {kind!r}",
            hint="one code has one classification in a process; give the other error its own code",
        )


def retry_class(kind: RetryKind) -> Callable[[_E], _E]:
    """Declare the classification of an app's own exception class (and its subclasses)::

        @retry_class("terminal")
        class CardDeclined(Exception):
            pass

    Any ``Exception`` subclass works, not only ``XJobsError``. For ``"retry-after"``, give the
    instances a ``retry_after`` attribute in seconds. The kind is checked here, when the class
    is declared: a bad one raises ``ErrorRetryInvalidError``. A ``retry_class`` declaration
    wins over every other one for that class; a subclass may declare its own.
    """
    if not isinstance(kind, str) or kind not in KINDS:
        raise ErrorRetryInvalidError(
            f"retry_class({kind!r}): not a retry classification",
            hint=f"use one of {_KINDS_TEXT}",
        )

    def declare(cls: _E) -> _E:
        if not isinstance(cls, type) or not issubclass(cls, Exception):
            raise ErrorRetryInvalidError(
                f"@retry_class({kind!r}) decorates an exception class, got {cls!r}",
                hint="put it directly above `class MyError(Exception):`",
            )
        own = cls.__dict__.get(CLASS_ATTRIBUTE)
        if own is not None and own != kind:
            raise ErrorRetryInvalidError(
                f"{cls.__qualname__} is already declared {own!r}, not {kind!r}",
                hint="keep one @retry_class(...) on a class",
            )
        setattr(cls, CLASS_ATTRIBUTE, kind)
        return cls

    return declare


def retry_for(code: str) -> RetryKind:
    """The registered kind of ``code``; ``"terminal"`` for a code nobody declared.

    Failing closed is right for reporting ("would this code be retried?"); the retry decision
    itself uses ``classify``, which leaves an undeclared error to the backoff (SPEC CLASS-01).
    """
    return BUILTIN.get(code) or _registered.get(code) or "terminal"


def is_declared(code: object) -> bool:
    """Whether ``code`` has a classification, built in or registered."""
    return isinstance(code, str) and (code in BUILTIN or code in _registered)


def classify(error: BaseException) -> RetryKind | None:
    """The declared classification of ``error``, or ``None`` (SPEC CLASS-03, adapted).

    In order:

    1. An instance of a class declared with ``@retry_class(kind)`` (or a subclass of one)
       → ``kind``.
    2. An ``XJobsError`` whose ``retry`` (the instance's, else its class's) is
       ``"retryable"`` or ``"retry-after"`` → that (``RetryAfterError``). Asking for *more*
       retries needs no declaration.
    3. An ``XJobsError`` whose ``retry`` is ``"terminal"`` → ``"terminal"`` only if that is
       declared: its code is built in or registered, or its class (not the instance) sets
       ``retry = "terminal"`` (``TerminalError`` and its subclasses). An instance override on
       an undeclared code → ``None`` (SPEC SE-18).
    4. An ``XJobsError`` with a declared code → the registered kind.
    5. Anything else — a plain Python exception, an undeclared code, a ``retry`` that is not a
       kind — → ``None``: the policy's backoff decides (SPEC CLASS-07).

    ::

        >>> classify(TerminalError("no email address"))
        'terminal'
        >>> classify(ValueError("boom")) is None
        True
    """
    declared = getattr(type(error), CLASS_ATTRIBUTE, None)
    if declared in KINDS:
        return cast(RetryKind, declared)
    if not isinstance(error, XJobsError):
        return None
    claim: Any = getattr(error, "retry", None)
    code: Any = getattr(error, "code", None)
    if claim in ("retryable", "retry-after"):
        return cast(RetryKind, claim)
    if claim == "terminal" and (
        is_declared(code) or getattr(type(error), "retry", None) == "terminal"
    ):
        return "terminal"
    if is_declared(code):
        return retry_for(code)
    return None


# --- tests ------------------------------------------------------------------------------------


@contextmanager
def _isolated_registry() -> Iterator[None]:
    """For tests: whatever is registered inside the block is gone after it."""
    global _registered
    with _lock:
        saved = _registered
    try:
        yield
    finally:
        with _lock:
            _registered = saved
