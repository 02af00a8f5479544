"""``quick_init`` (django_xjobs/drivers/values.py): a frozen dataclass built per job gets an
``__init__`` that fills ``__dict__`` directly, and stays the value it was — same signature,
defaults, factories and ``__post_init__``, frozen, equal and hashed by its fields."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import FrozenInstanceError, dataclass, field
from uuid import uuid4

import pytest

from django_xjobs.drivers import contract
from django_xjobs.drivers.values import quick_init
from django_xjobs.errors import InputInvalidError
from django_xjobs.run.execution import Execution

QUICK = [
    contract.EnqueueRequest,
    contract.ClaimedJob,
    contract.Complete,
    contract.RetryAt,
    contract.SuspendUntil,
    contract.Finish,
    contract.EnqueueResult,
    Execution,
]


def _plain(cls: type) -> type:
    """The same fields as ``cls`` in a dataclass made the standard way."""
    return dataclasses.make_dataclass(
        cls.__name__,
        [(f.name, f.type, f) for f in dataclasses.fields(cls)],
        frozen=True,
    )


@pytest.mark.parametrize("cls", QUICK, ids=lambda cls: cls.__name__)
def test_each_quick_class_keeps_the_signature_dataclasses_would_give_it(cls):
    ours = inspect.signature(cls)
    standard = inspect.signature(_plain(cls))
    assert [(p.name, p.default, p.kind) for p in ours.parameters.values()] == [
        (p.name, p.default, p.kind) for p in standard.parameters.values()
    ]
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"


@quick_init
@dataclass(frozen=True)
class Sample:
    name: str
    count: int = 0
    tags: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError("count must not be negative")
        self.checked.append(self.name)


def test_a_quick_value_is_built_as_the_standard_one_would_be():
    made = Sample("a")
    assert vars(made) == {"name": "a", "count": 0, "tags": [], "checked": ["a"]}
    assert Sample("a").tags is not made.tags  # a fresh list from the factory each time
    given: list[str] = ["x"]
    assert Sample("b", 2, given).tags is given
    assert Sample(name="c", tags=["t"], count=3) == Sample("c", 3, ["t"])
    assert hash(Sample("d", 1, ())) == hash(Sample("d", 1, ()))  # type: ignore[arg-type]
    assert repr(Sample("e")) == "Sample(name='e', count=0, tags=[])"
    with pytest.raises(FrozenInstanceError):
        made.name = "z"  # type: ignore[misc]
    with pytest.raises(ValueError, match="negative"):
        Sample("f", -1)  # __post_init__ still runs
    with pytest.raises(TypeError):
        Sample()  # type: ignore[call-arg]


def test_the_library_values_still_check_and_freeze():
    with pytest.raises(InputInvalidError, match="the idempotency key contains a NUL"):
        contract.EnqueueRequest(
            name="a", queue="q", input={}, input_json="{}", idempotency_key="k\x00", max_attempts=1
        )
    result = contract.EnqueueResult(id=uuid4(), run_id=None)
    assert (result.deduped, result.staged, result.replaced) == (False, False, False)
    with pytest.raises(FrozenInstanceError):
        result.staged = True  # type: ignore[misc]


def _class(name: str) -> type:
    return type(name, (), {"__annotations__": {"a": "int"}})


def test_quick_init_refuses_a_class_it_cannot_build_the_same():
    with pytest.raises(TypeError, match="frozen dataclasses without slots"):
        quick_init(dataclass(_class("Open")))
    with pytest.raises(TypeError, match="frozen dataclasses without slots"):
        quick_init(dataclass(frozen=True, slots=True)(_class("Slotted")))
    with pytest.raises(TypeError, match="not a plain init field"):
        quick_init(dataclass(frozen=True, kw_only=True)(_class("Keyword")))
