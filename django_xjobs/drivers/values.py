"""Frozen dataclasses that a worker builds once per job, built without a call per field.

STYLE asks for decisions as frozen values. A frozen dataclass's generated ``__init__`` stores
each field through ``object.__setattr__`` (its own ``__setattr__`` refuses), one call per field,
and the values a drained job makes (the claimed row, its settle, its execution, an enqueue's
request and result) cost a tenth of a worker's CPU that way. ``quick_init`` gives such a class an
``__init__`` that writes the instance's ``__dict__`` instead: the same signature, defaults,
factories and ``__post_init__``, and the instance is the same value (frozen after ``__init__``,
equal, hashed and shown as before). ``tests/drivers/test_values.py`` holds each class to
that. It sits with the driver's value types (the ``contract`` package), its first users.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")

#: what a field with a default factory receives when the caller passes nothing
_FACTORY = object()


def quick_init(cls: type[T]) -> type[T]:
    """Replace the ``__init__`` of the frozen dataclass ``cls`` (not slotted, every field a
    positional-or-keyword init field) with one that fills ``__dict__`` directly."""
    # type[T] cannot say "a dataclass" to mypy: these two lines read what the decorator made
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    if not params.frozen or "__slots__" in cls.__dict__:
        raise TypeError(f"quick_init is for frozen dataclasses without slots, not {cls.__name__}")
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    signature, lines = [], []
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = field.name
        if not field.init or field.kw_only:
            raise TypeError(f"quick_init: {cls.__name__}.{name} is not a plain init field")
        if field.default is not dataclasses.MISSING:
            namespace[f"_default_{name}"] = field.default
            signature.append(f"{name}=_default_{name}")
            lines.append(f"    fields[{name!r}] = {name}")
        elif field.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{name}"] = field.default_factory
            signature.append(f"{name}=_FACTORY")
            lines.append(
                f"    fields[{name!r}] = _factory_{name}() if {name} is _FACTORY else {name}"
            )
        else:
            signature.append(name)
            lines.append(f"    fields[{name!r}] = {name}")
    if hasattr(cls, "__post_init__"):
        lines.append("    self.__post_init__()")
    source = "\n".join(
        [f"def __init__(self, {', '.join(signature)}):", "    fields = self.__dict__", *lines]
    )
    exec(source, namespace)  # what dataclasses itself does to make an __init__
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    # replacing a method is the point here, which mypy refuses on principle
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
