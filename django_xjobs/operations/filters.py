"""A bulk verb's filter (issue 45, SPEC BULK-01): a ``JobFilter`` built from a filter, a dict
of its fields or keywords, each field checked, and refused in one coded line
(``X_FILTER_INVALID``) before anything is read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from uuid import UUID

from .. import conf, redact
from ..declarations import registry
from ..drivers.contract import FILTER_FIELDS, JobFilter
from ..errors import InputEncryptedError, JobFilterError
from ..payload import JSONValue, NotJSON, check_json
from ..states import JOB_STATES
from ..text import check_label, did_you_mean

#: the stop reasons a row may hold (``models.StopReason``, which this layer may not import at
#: module level: a test holds the two equal)
STOP_REASONS = (
    "terminal",
    "attempts-exhausted",
    "cancelled",
    "timeout",
    "expired",
    "dependency_failed",
)
#: the fields given as one text each, and the time bounds
_SCALARS = ("queue", "name", "tenant_id", "error_code", "stop_reason")
_TIMES = ("created_after", "created_before", "updated_after", "updated_before")


def job_filter(
    filter: JobFilter | Mapping[str, object] | None = None, **fields: object
) -> JobFilter:
    """A checked ``JobFilter`` from a filter, a dict of its fields, keyword fields, or both
    (SPEC BULK-01). ``ids`` names the jobs themselves (ids or their text; SPEC BULK-13). An
    unknown field, a value of the wrong kind, an ``input`` that is not a
    JSON object (or JSON text of one) and a time without a timezone raise ``JobFilterError``::

        job_filter(state="dead", queue="emails", input='{"order_id": 4711}')
    """
    given: dict[str, object] = {}
    if isinstance(filter, JobFilter):
        given = {name: getattr(filter, name) for name in FILTER_FIELDS}
    elif isinstance(filter, Mapping):
        given = dict(filter)
    elif filter is not None:
        raise JobFilterError(
            f"a filter is a JobFilter or a dict of its fields, not {type(filter).__name__}",
            hint=f"fields: {', '.join(FILTER_FIELDS)}",
        )
    given.update(fields)
    unknown = sorted(str(k) for k in given if k not in FILTER_FIELDS)
    if unknown:
        guess = did_you_mean(unknown[0], FILTER_FIELDS)
        raise JobFilterError(
            f"a filter has no field {unknown[0]!r}",
            hint=f"{guess + ' ' if guess else ''}fields: {', '.join(FILTER_FIELDS)}",
        )
    text = {name: _text(name, given.get(name)) for name in _SCALARS}
    times = {name: _time(name, given.get(name)) for name in _TIMES}
    code, reason = text["error_code"], text["stop_reason"]
    if code is not None and (":" in code or code != code.strip()):
        raise JobFilterError(
            f"error_code={code!r} must be a code alone",
            hint='the text before the first colon of last_error, e.g. "X_TERMINAL"',
        )
    if reason is not None and reason not in STOP_REASONS:
        raise JobFilterError(
            f"stop_reason={reason!r} is not a stop reason",
            hint=f"one of {', '.join(STOP_REASONS)}",
        )
    inputs = _input(given.get("input"))
    if inputs is not None:
        _check_clear(text["name"])
    return JobFilter(
        state=_states(given.get("state")),
        queue=text["queue"],
        name=text["name"],
        tenant_id=text["tenant_id"],
        error_code=code,
        stop_reason=reason,
        created_after=times["created_after"],
        created_before=times["created_before"],
        updated_after=times["updated_after"],
        updated_before=times["updated_before"],
        input=inputs,
        ids=_ids(given.get("ids")),
    )


def _check_clear(name: str | None) -> None:
    """SPEC CRYPT-06: under ``XJOBS["ENCRYPTION_KEYS"]`` an input filter must name a job whose
    inputs are stored in clear (``@job(encrypt=False)``): the database cannot look inside a
    sealed one, and a filter that silently matched nothing would read as "no such jobs"."""
    if conf.get().encryption is None:
        return
    handle = None if name is None else registry.get_job(name)
    if handle is None or handle.encrypt:
        what = "no job name" if name is None else f"job {name!r}, whose inputs are encrypted"
        raise InputEncryptedError(
            f"an input filter cannot match encrypted inputs (XJOBS['ENCRYPTION_KEYS'] is set), "
            f"and the filter names {what}"
        )


def _states(value: object) -> tuple[str, ...]:
    if value is None or value == () or value == []:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple | set | frozenset):
        raise JobFilterError(
            f"state={value!r} must be a state or a list of states",
            hint=f"states: {', '.join(JOB_STATES)}",
        )
    states: list[str] = []
    for item in items:
        if item not in JOB_STATES:
            guess = did_you_mean(item, JOB_STATES)
            raise JobFilterError(
                f"state={item!r} is not a job state",
                hint=f"{guess + ' ' if guess else ''}states: {', '.join(JOB_STATES)}",
            )
        if item not in states:
            states.append(str(item))
    return tuple(states)


def _text(name: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise JobFilterError(f"{name}={value!r} must be a non-empty string")
    check_label(value, name, error=JobFilterError)
    return value


def _time(name: str, value: object) -> datetime | None:
    if value is None:
        return None
    when = value
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            when = None
    if not isinstance(when, datetime) or when.tzinfo is None:
        raise JobFilterError(
            f"{name}={value!r} must be a time with its timezone",
            hint="an aware datetime, or ISO 8601 text such as 2026-12-07T03:00:00+00:00",
        )
    return when


def _input(value: object) -> dict[str, JSONValue] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise JobFilterError(
                f"input is not JSON: {error}",
                hint="a JSON object the input must contain, e.g. '{\"order_id\": 4711}'",
            ) from None
    if not isinstance(value, Mapping):
        raise JobFilterError(
            f"input={value!r} must be a JSON object",
            hint='the fields the input must contain, e.g. {"order_id": 4711}',
        )
    try:
        check_json(dict(value))
    except NotJSON as error:
        raise JobFilterError(f"input is not plain JSON at {error}") from None
    return {str(key): item for key, item in value.items()}  # checked JSON above


#: ids one filter may name: the admin's selected rows, a command line's ids (a batch's worth)
MAX_IDS = 1000


def _ids(value: object) -> tuple[UUID, ...]:
    if value is None or value == () or value == []:
        return ()
    items = [value] if isinstance(value, str | UUID) else value
    if not isinstance(items, list | tuple | set | frozenset):
        raise JobFilterError(
            f"ids={value!r} must be a job id or a list of them",
            hint="e.g. ids=['0193a1c2-...'] (python manage.py xjobs ls lists ids)",
        )
    if len(items) > MAX_IDS:
        raise JobFilterError(
            f"ids names {len(items):,} jobs; a filter names at most {MAX_IDS:,}",
            hint="filter by what the jobs share instead (state, queue, name, error_code, input)",
        )
    ids: list[UUID] = []
    for item in items:
        try:
            job_id = item if isinstance(item, UUID) else UUID(str(item))
        except ValueError:
            raise JobFilterError(
                f"ids holds {item!r}, which is not a job id",
                hint="a job's full id, e.g. 0193a1c2-7d4e-7b8a-9c1d-2e3f4a5b6c7d",
            ) from None
        if job_id not in ids:
            ids.append(job_id)
    return tuple(sorted(ids))


def shown_filter(filter: Mapping[str, object]) -> dict[str, object]:
    """A filter (``JobFilter.to_json()``) as a person may see it: its ``input`` values under
    ``XJOBS["REDACT_KEYS"]`` masked, as a job's inputs are wherever they are shown. The audit
    record keeps it so (SPEC AUDIT-03), and the admin's confirmation page shows it so (SPEC
    REDACT-05); the action itself is given the filter as it is, to match the real values."""
    shown = dict(filter)
    if shown.get("input") is not None:
        shown["input"] = redact.mask(shown["input"])
    return shown
