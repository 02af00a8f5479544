"""The capability flags, ``driver.features``: both drivers hold fleet slots (SPEC WORK-02) and
keep the backfill ledger (BF-07); only the PostgreSQL driver's jobs reach a child process the
worker starts (LEASE-19). A caller reads these flags, never a missing store."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from django_xjobs.drivers.contract import DriverFeatures
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.drivers.postgres import PostgresDriver


def test_both_drivers_hold_fleet_slots_and_keep_the_backfill_ledger():
    for driver in (MemoryDriver(), PostgresDriver("default")):
        assert driver.features.supports_fleet_slots is True
        assert driver.features.supports_backfill_ledger is True


def test_only_the_postgresql_drivers_jobs_reach_a_child_process():
    assert PostgresDriver("default").features.supports_child_runs is True
    assert MemoryDriver().features.supports_child_runs is False


def test_the_flags_are_one_frozen_value():
    features = MemoryDriver().features
    assert isinstance(features, DriverFeatures)
    with pytest.raises(FrozenInstanceError):
        features.supports_fleet_slots = False
