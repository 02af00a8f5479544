"""JSON checks for everything stored as ``jsonb``: inputs, results, and (later) step outputs."""

from __future__ import annotations

import json
import math
from typing import Any

from .errors import PayloadTooLargeError


class NotJSON(ValueError):
    """A value is not plain JSON; ``path`` says where."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def check_json(value: Any, path: str = "$", _seen: frozenset[int] = frozenset()) -> None:
    """Raise ``NotJSON`` unless ``value`` round-trips through ``jsonb`` unchanged.

    Refused: NaN and infinities, ``\\u0000`` (PostgreSQL cannot store it), non-string keys,
    and any type JSON has no form for (dates, decimals, sets, model instances...).
    """
    kind = type(value)
    if kind is int or kind is bool or value is None:
        return
    if kind is str and value.isascii():  # ASCII holds no lone surrogate; only NUL to look for
        if "\x00" in value:
            raise NotJSON(path, "contains a NUL character (\\u0000), which PostgreSQL cannot store")
        return
    if kind is dict and all(type(k) is str and k.isascii() for k in value):
        if id(value) in _seen:
            raise NotJSON(path, "contains itself")
        seen = _seen | {id(value)}
        for key, item in value.items():
            if "\x00" in key:
                raise NotJSON(
                    f"{path}.{key}",
                    "contains a NUL character (\\u0000), which PostgreSQL cannot store",
                )
            check_json(item, f"{path}.{key}", seen)
        return
    if isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotJSON(path, f"{value!r} is not a JSON number")
        return
    if isinstance(value, str):
        if "\x00" in value:
            raise NotJSON(path, "contains a NUL character (\\u0000), which PostgreSQL cannot store")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise NotJSON(path, "contains a lone surrogate, which is not UTF-8 text") from None
        return
    if isinstance(value, list | tuple | dict):
        if id(value) in _seen:
            raise NotJSON(path, "contains itself")
        seen = _seen | {id(value)}
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise NotJSON(
                        path, f"key {key!r} is {_a(type(key).__name__)}; JSON keys are strings"
                    )
                check_json(key, f"{path}.{key}", seen)
                check_json(item, f"{path}.{key}", seen)
        else:
            for index, item in enumerate(value):
                check_json(item, f"{path}[{index}]", seen)
        return
    raise NotJSON(path, f"{_a(type(value).__name__)} is not JSON ({_advice(value)})")


def _a(noun: str) -> str:
    """``noun`` with its indefinite article: "an Order", "a datetime"."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _advice(value: Any) -> str:
    if hasattr(value, "isoformat"):
        return "pass value.isoformat() and parse it in the job"
    if hasattr(value, "pk"):
        return "pass the primary key and load the object in the job"
    return "convert it to a str, number, list or dict"


#: one encoder, built once: json.dumps with options builds a new one per call
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode(value: Any, *, limit: int, what: str) -> str:
    """``value`` as compact JSON text, refusing it when larger than ``limit`` bytes."""
    text = _ENCODER.encode(value)
    size = len(text) if text.isascii() else len(text.encode())
    if size > limit:
        raise PayloadTooLargeError(f"{what} is {size} bytes, above the {limit}-byte cap")
    return text
