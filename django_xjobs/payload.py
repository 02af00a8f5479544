"""JSON checks for everything stored as ``jsonb``: inputs, results, step outputs, event data."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeAlias

from .errors import PayloadTooLargeError
from .text import storable

#: a value as JSON holds it, read back from ``jsonb`` or about to be written there
JSONValue: TypeAlias = "dict[str, JSONValue] | list[JSONValue] | str | int | float | bool | None"


class NotJSON(ValueError):
    """A value is not plain JSON; ``path`` says where."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = storable(path, 256)  # a key may hold the very NUL or surrogate refused
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


#: how deep a stored JSON value may nest (a dict or list inside another counts one level):
#: whatever is accepted must decode in a worker and render in the admin, whose decoders and
#: printers recurse once or more per level within Python's recursion limit of 1,000
MAX_DEPTH = 100
#: the most digits an integer may have: Python will not read or write a longer one as text
MAX_INT_DIGITS = 4300
_INT_LIMIT = 10**MAX_INT_DIGITS
_NUL = "contains a NUL character (\\u0000), which PostgreSQL cannot store"
#: the one key of an encrypted payload's stored wrapper (crypt.py): a value of that shape alone
#: would read back as a sealed payload, so it is refused wherever a payload is checked
SEALED_MARK = "xjobs:fernet"
_RESERVED = (
    f'is the shape reserved for an encrypted payload ({{"{SEALED_MARK}": "..."}}); '
    "wrap it in another object or rename the key"
)


def check_json(value: Any, path: str = "$") -> None:
    """Raise ``NotJSON`` unless ``value`` round-trips through ``jsonb`` unchanged.

    Refused: NaN and infinities, ``\\u0000`` (PostgreSQL cannot store it), lone surrogates,
    non-string keys, integers over ``MAX_INT_DIGITS`` digits, nesting deeper than
    ``MAX_DEPTH``, and any type JSON has no form for (dates, decimals, sets, model
    instances...). Iterative, so no input can exhaust the interpreter's stack here.
    """
    if type(value) is dict and len(value) == 1 and type(value.get(SEALED_MARK)) is str:
        raise NotJSON(_path(path), _RESERVED)  # SPEC CRYPT-15: it would read back as sealed
    if type(value) is dict and _flat_and_plain(value):
        return  # the common input (ids and short strings): no walk needed
    # each entry: a value, where it sits (its holder's place and its key or index, rendered as
    # a path only for an error), how many containers hold it, and the chain of those containers'
    # ids (linked, so a push copies nothing; read only to tell a cycle from depth)
    stack: list[tuple[Any, Any, int, Any]] = [(value, path, 0, None)]
    while stack:
        value, where, depth, holders = stack.pop()
        kind = type(value)
        if kind is str and value.isascii():  # ASCII holds no lone surrogate; only NUL to look for
            if "\x00" in value:
                raise NotJSON(_path(where), _NUL)
            continue
        if kind is bool or value is None:
            continue
        if isinstance(value, int):
            if not -_INT_LIMIT < value < _INT_LIMIT:
                raise NotJSON(_path(where), f"is an integer of more than {MAX_INT_DIGITS:,} digits")
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                raise NotJSON(_path(where), f"{value!r} is not a JSON number")
            continue
        if isinstance(value, str):
            _check_text(value, where)
            continue
        if not isinstance(value, list | tuple | dict):
            raise NotJSON(
                _path(where), f"{_a(type(value).__name__)} is not JSON ({_advice(value)})"
            )
        if depth >= MAX_DEPTH:
            place = _path(where)
            place = place if len(place) <= 60 else f"{place[:57]}..."
            if _holds(holders, id(value)):
                raise NotJSON(place, "contains itself")
            raise NotJSON(place, f"is nested deeper than {MAX_DEPTH} levels")
        depth += 1
        holders = (id(value), holders)
        if isinstance(value, dict):
            items: list[tuple[Any, Any, int, Any]] = []
            for key, item in value.items():
                if not isinstance(key, str):
                    raise NotJSON(
                        _path(where),
                        f"key {key!r} is {_a(type(key).__name__)}; JSON keys are strings",
                    )
                _check_text(key, (where, key))
                items.append((item, (where, key), depth, holders))
            stack.extend(reversed(items))  # depth first, in order: the first bad value is named
        else:
            stack.extend(
                (value[i], (where, i), depth, holders) for i in range(len(value) - 1, -1, -1)
            )


def _path(where: object) -> str:
    """The path of a place: ``$.order.lines[2]`` from the chain of keys and indexes to it."""
    parts = []
    while isinstance(where, tuple):
        where, step = where
        parts.append(f"[{step}]" if isinstance(step, int) else f".{step}")
    return f"{where}{''.join(reversed(parts))}"


def _holds(holders: Any, wanted: int) -> bool:
    """Whether ``wanted`` is the id of a container on the chain ``holders`` (a cycle)."""
    while holders is not None:
        if holders[0] == wanted:
            return True
        holders = holders[1]
    return False


def _flat_and_plain(value: dict[Any, Any]) -> bool:
    """Whether every key is ASCII text and every item a small int, a bool, None or ASCII text,
    none holding a NUL: plain JSON at one level, decided without building a path."""
    for key, item in value.items():
        if type(key) is not str or not key.isascii() or "\x00" in key:
            return False
        kind = type(item)
        if kind is str:
            if not item.isascii() or "\x00" in item:
                return False
        elif kind is int:
            if not -_INT_LIMIT < item < _INT_LIMIT:
                return False
        elif kind is not bool and item is not None:
            return False
    return True


def _check_text(text: str, where: object) -> None:
    if "\x00" in text:
        raise NotJSON(_path(where), _NUL)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise NotJSON(
                _path(where), "contains a lone surrogate, which is not UTF-8 text"
            ) from None


def decode(stored: object) -> Any:
    """A stored JSON text as a fresh value; ``NotJSON`` when this process cannot read it
    (nested past the interpreter's recursion limit, or a number Python will not parse), so one
    bad row is refused on its own instead of failing every row read beside it. A value (the
    memory driver keeps values, not text) is copied through its text, as a store would."""
    try:
        return json.loads(stored if isinstance(stored, str | bytes) else json.dumps(stored))
    except (RecursionError, ValueError) as error:
        reason = "nested too deeply to decode" if isinstance(error, RecursionError) else error
        raise NotJSON("$", f"cannot be decoded: {reason}") from None


def _a(noun: str) -> str:
    """``noun`` with its indefinite article: "an Order", "a datetime"."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _advice(value: object) -> str:
    if hasattr(value, "isoformat"):
        return "pass value.isoformat() and parse it in the job"
    if hasattr(value, "pk"):
        return "pass the primary key and load the object in the job"
    return "convert it to a str, number, list or dict"


#: one encoder, built once: json.dumps with options builds a new one per call
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _compiled() -> Callable[[Any], str]:
    """The standard library's C encoder with ``_ENCODER``'s options, made once.
    ``JSONEncoder.encode`` makes a new one on every call (its markers dict and its closure),
    which cost about four times the encoding of a small input (a job's input, a run's
    result), once per enqueued job and once per settled one. It keeps no markers: every caller of ``encode`` has passed
    the value through ``check_json``, which refuses a cycle by its path and bounds the depth,
    and ``default`` is never reached for the plain values it lets through."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the _json accelerator
        return _ENCODER.encode
    chunks = make(None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",",
                  False, False, False)  # fmt: skip
    return lambda value: "".join(chunks(value, 0))


_compact = _compiled()

#: a JSON string (skipped whole), or a number written with a positive exponent (``1e+20``)
_STRING_OR_EXPONENT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?\d+(?:\.\d+)?e\+\d+)')


def _positional(match: re.Match[str]) -> str:
    number = match.group(1)
    return match.group(0) if number is None else f"{Decimal(number):f}.0"


def dumps(value: object) -> str:
    """``value`` (checked by ``check_json`` first) as compact JSON text that reads back from
    ``jsonb`` as it was written: the one text every store writes a payload as.

    ``jsonb`` keeps a number's decimal digits and scale, not its type: Python writes a float of
    1e16 or more as ``1e+20``, which PostgreSQL stores as the integer 100000000000000000000
    and reads back as an ``int`` (``1.2345678901234567e+25`` even as another value). Such a
    float is written out in full with a ``.0``, which keeps its scale, so it reads back as the
    same float, on PostgreSQL as in memory (SPEC DRV-05). An ``int`` is kept exactly at any
    size up to ``MAX_INT_DIGITS``, a 64-bit primary key included."""
    text = _compact(value)
    if "e+" in text:  # rare: a big float, or the two characters inside a string
        text = _STRING_OR_EXPONENT.sub(_positional, text)
    return text


def encode(value: object, *, limit: int, what: str) -> str:
    """``value`` (checked by ``check_json`` first) as compact JSON text (``dumps``), refusing it
    when larger than ``limit`` bytes."""
    text = dumps(value)
    size = len(text) if text.isascii() else len(text.encode())
    if size > limit:
        raise PayloadTooLargeError(f"{what} is {size} bytes, above the {limit}-byte cap")
    return text
