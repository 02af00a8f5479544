"""What a handler's signature allows: its ctx parameter first, inputs bound by keyword (fast
for the common case), and the JSON schema its inputs describe."""

from __future__ import annotations

import inspect
import string
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import IdempotencyRequiredError, InputInvalidError, InvariantError


class Binder:
    """``Signature.bind`` precomputed for the common case, so an enqueue does not walk the
    signature: keyword inputs that name only declared parameters and cover the required ones
    bind to a dict in signature order, defaults filled. Anything else (a ``**kwargs`` handler,
    a missing or unknown input) returns None and takes ``inspect``'s path, with its errors."""

    def __init__(self, signature: inspect.Signature) -> None:
        params = list(signature.parameters.values())[1:]
        self.open = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
        self.names = tuple(p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD)
        self.accepted = frozenset(self.names)
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}
        self.required = frozenset(n for n in self.names if n not in self.defaults)

    def fits(self, inputs: Mapping[str, object]) -> bool:
        """Whether ``fn(ctx, **inputs)`` binds: every required input given, and no unknown one
        unless the handler takes ``**kwargs``. Set tests only, for each run's check."""
        return self.required <= inputs.keys() and (self.open or self.accepted.issuperset(inputs))

    def bind(self, inputs: Mapping[str, object]) -> dict[str, Any] | None:
        if self.open or not self.accepted.issuperset(inputs) or not self.required <= inputs.keys():
            return None
        if len(inputs) == len(self.names):
            return {name: inputs[name] for name in self.names}
        defaults = self.defaults
        return {name: inputs[name] if name in inputs else defaults[name] for name in self.names}


def check_stored(name: str, signature: inspect.Signature, inputs: object) -> None:
    """SPEC EXEC-01: stored inputs that no longer fit the handler (a parameter renamed or added
    since they were queued) fail the attempt naming the mismatch, not as a TypeError that reads
    like a bug in the body; classification then decides the retry, as for any failure."""
    problem = f"it is {type(inputs).__name__}, not a dict of inputs"
    if isinstance(inputs, dict):
        try:
            signature.bind(None, **inputs)
            return
        except TypeError as error:
            problem = str(error)
    params = list(signature.parameters.values())[1:]
    takes = "(" + ", ".join(str(p) for p in params) + ")" if params else "no inputs"
    raise InputInvalidError(
        f"job {name!r}: its stored input no longer fits the handler: {problem}",
        hint=f"it takes {takes}; requeue the job with inputs that fit, or keep accepting the "
        "old names",
    )


def signature_of(fn: Callable[..., object]) -> inspect.Signature:
    """The handler's signature with postponed (string) annotations evaluated when possible."""
    try:
        return inspect.signature(fn, eval_str=True)
    except Exception:  # an annotation naming something not importable here: keep the strings
        return inspect.signature(fn)


#: annotations that say a first parameter is an input, not the job context
INPUT_TYPES = (int, float, str, bool, bytes, list, dict, tuple)


def check_handler(handler: Callable[..., object]) -> inspect.Signature:
    signature = signature_of(handler)
    params = list(signature.parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    first = params[0] if params else None
    if (
        first is None
        or first.kind not in positional
        or first.default is not inspect.Parameter.empty
        or first.annotation in INPUT_TYPES
        or first.annotation in {t.__name__ for t in INPUT_TYPES}
    ):
        name = getattr(handler, "__qualname__", repr(handler))
        raise InvariantError(
            f"handler {name}() is missing its ctx parameter: a job handler takes the job "
            "context first, then its inputs",
            hint=f"def {getattr(handler, '__name__', 'my_job')}(ctx, ...): ...",
        )
    for param in params[1:]:
        if param.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL):
            raise InvariantError(
                f"parameter {param} cannot be given by keyword; inputs are keyword arguments",
                hint="make it an ordinary or keyword-only parameter",
            )
    return signature


JSON_TYPES = {
    int: "integer",
    float: "number",
    str: "string",
    bool: "boolean",
    list: "array",
    dict: "object",
}


def input_schema(signature: inspect.Signature) -> dict[str, Any]:
    params = list(signature.parameters.values())[1:]
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in params:
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        json_type = JSON_TYPES.get(param.annotation) if isinstance(param.annotation, type) else None
        properties[param.name] = {"type": json_type} if json_type else {}
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": open_ended,
    }


def check_key(key: object, signature: inspect.Signature, *, missing: object = None) -> None:
    """An ``idempotency_key`` declaration: present, and a template whose fields are inputs the
    handler takes (SPEC JOB-08); ``missing`` is the caller's "not given" marker."""
    if key is missing or key is None or key == "":
        raise IdempotencyRequiredError(
            "idempotency_key is required",
            hint='e.g. idempotency_key="charge:{order_id}", or a callable taking the inputs',
        )
    if callable(key):
        return
    if not isinstance(key, str):
        raise InvariantError(
            f"idempotency_key={key!r} must be a str template or a callable",
            hint='e.g. idempotency_key="charge:{order_id}"',
        )
    params = list(signature.parameters.values())[1:]
    names = {p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD}
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(key) if f is not None]
    except ValueError as error:
        raise InvariantError(
            f"idempotency_key={key!r} is not a valid template: {error}",
            hint="fields are written {input_name}; a literal brace is {{ or }}",
        ) from None
    for field in fields:
        root = field.split(".", 1)[0].split("[", 1)[0]
        if not root or root.isdigit():
            raise InvariantError(
                f"idempotency_key={key!r} uses a positional field {{{field}}}",
                hint="name the input: {order_id}",
            )
        if root not in names and not open_ended:
            raise InvariantError(
                f"idempotency_key={key!r} names {{{root}}}, which the handler does not take",
                hint=f"inputs: {', '.join(sorted(names)) or 'none'}",
            )
