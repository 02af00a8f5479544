"""The one way to a store: ``JobDriver`` has an accessor per store and ``close()``, and both
drivers build each store once, so a role that binds one at construction holds the same object
every later call answers (issue 41)."""

from __future__ import annotations

from typing import Protocol

import pytest

from django_xjobs.drivers.contract import (
    BackfillLedger,
    BatchStore,
    EventStore,
    HistoryStore,
    JobDriver,
    JobStore,
    LimitStore,
    OutboxStore,
    ReadStore,
    RunStore,
    SchedulerStore,
    StepStore,
)
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.drivers.postgres import PostgresDriver

#: each accessor and the protocol whose members the object it answers has
STORES = {
    "jobs": JobStore,
    "runs": RunStore,
    "reads": ReadStore,
    "limits": LimitStore,
    "history": HistoryStore,
    "steps": StepStore,
    "events": EventStore,
    "outbox": OutboxStore,
    "batches": BatchStore,
    "backfills": BackfillLedger,
    "scheduler": SchedulerStore,
}


def _verbs(protocol: type) -> set[str]:
    return {
        name
        for klass in protocol.__mro__
        if klass.__module__.startswith("django_xjobs.drivers.contract")
        for name, value in vars(klass).items()
        if callable(value) and not name.startswith("_")
    }


@pytest.fixture(params=["memory", "postgres"])
def driver(request, db):
    return MemoryDriver() if request.param == "memory" else PostgresDriver("default")


def test_the_root_has_an_accessor_per_store_and_close_and_no_verb():
    assert _verbs(JobDriver) == {*STORES, "close"}
    assert JobDriver.__bases__ == (Protocol,)  # it takes no store's verbs by extending it


def test_each_accessor_answers_one_object_with_its_stores_verbs(driver):
    for accessor, protocol in STORES.items():
        store = getattr(driver, accessor)()
        assert getattr(driver, accessor)() is store, accessor
        missing = {verb for verb in _verbs(protocol) if not callable(getattr(store, verb, None))}
        assert missing == set(), f"{accessor}() lacks {missing}"


def test_events_and_the_outbox_are_built_once_per_alias(driver):
    assert driver.events() is driver.events(driver.database or "default")
    assert driver.outbox() is driver.outbox(driver.database or "default")
    assert driver.outbox(claim_lease=30) is driver.outbox(claim_lease=30)
