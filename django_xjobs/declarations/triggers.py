"""What a job declares events do to it (issue 43): ``on_event`` (the events that start a run of
it) and ``cancel_on`` (the events that cancel its live runs, by the input fields they name),
checked when the job is declared (SPEC EVT-12)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import MappingProxyType

from ..errors import InvariantError
from ..text import check_name


def on_event_names(value: object) -> tuple[str, ...]:
    """``on_event=``: one event name or a list of them, as a tuple without repeats."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (_event_name(value, "on_event"),)
    if not isinstance(value, list | tuple) or not value:
        raise InvariantError(
            f"on_event={value!r} must be an event name or a non-empty list of them",
            hint='e.g. on_event="user.created" or on_event=["user.created", "user.invited"]',
        )
    names = [_event_name(name, f"on_event[{i}]") for i, name in enumerate(value)]
    return tuple(dict.fromkeys(names))


def cancel_on_fields(value: object, signature: inspect.Signature) -> Mapping[str, tuple[str, ...]]:
    """``cancel_on=``: event name → the input fields an event's data must equal, each an input
    the handler takes, read-only."""
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping) or not value:
        raise InvariantError(
            f"cancel_on={value!r} must be a non-empty dict of event name to input field names",
            hint='e.g. cancel_on={"order.cancelled": ["order_id"]}',
        )
    params = list(signature.parameters.values())[1:]
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    inputs = {p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD}
    declared: dict[str, tuple[str, ...]] = {}
    for event, fields in value.items():
        name = _event_name(event, "cancel_on")
        if isinstance(fields, str) or not isinstance(fields, list | tuple) or not fields:
            raise InvariantError(
                f"cancel_on[{name!r}]={fields!r} must be a non-empty list of input field names",
                hint=f'e.g. cancel_on={{"{name}": ["order_id"]}}: a run is cancelled when the '
                "event's data has each field equal to its input",
            )
        for field in fields:
            if not isinstance(field, str) or not field:
                raise InvariantError(
                    f"cancel_on[{name!r}]: {field!r} is not an input field name",
                    hint="list the names of the handler's inputs, as strings",
                )
            check_name(field, f"cancel_on[{name!r}] field")
            if not takes_any and field not in inputs:
                raise InvariantError(
                    f"cancel_on[{name!r}]: {field!r} is not an input of the handler",
                    hint=f"it takes {', '.join(sorted(inputs)) or 'no inputs'}",
                )
        declared[name] = tuple(dict.fromkeys(fields))
    return MappingProxyType(declared)


def _event_name(value: object, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvariantError(
            f"{field}: {value!r} is not an event name: a non-empty string",
            hint='name it as publish_event does, e.g. "order.cancelled"',
        )
    check_name(value, f"{field} event name")
    return value
