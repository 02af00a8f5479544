"""A worker's settings, resolved once (worker/config.py): what it was given, else what
``XJOBS`` says, checked before any part of the worker is built."""

from __future__ import annotations

import dataclasses

import pytest
from django.test import override_settings

from django_xjobs.errors import InvariantError
from django_xjobs.worker.config import WorkerConfig
from django_xjobs.worker.worker import Worker


def test_lease_03_the_renewal_interval_defaults_to_a_third_of_the_timeout(db):
    worker = Worker(queues=["default"], visibility_timeout=30)
    assert worker.heartbeat_interval == 10


def test_a_visibility_timeout_shorter_than_three_heartbeats_is_refused(db):
    with pytest.raises(InvariantError) as caught:
        Worker(queues=["default"], visibility_timeout=10, heartbeat_interval=5)
    assert "three" in caught.value.message and caught.value.hint


def test_the_settings_fill_in_what_a_worker_was_not_given():
    with override_settings(
        XJOBS={"VISIBILITY_TIMEOUT": 60, "POLL_INTERVAL": 2, "CONCURRENCY": "default=3,other=4"}
    ):
        config = WorkerConfig.resolve(queues=["default", "other"], worker_id="w-1")
    assert (config.visibility_timeout, config.heartbeat_interval, config.poll_interval) == (
        60,
        20,
        2,
    )
    assert (config.concurrency, config.shares, config.worker_id) == (
        7,
        {"default": 3, "other": 4},
        "w-1",
    )
    assert [lane.queues for lane in config.lanes] == [("default",), ("other",)]
    assert config.prefetch is config.lanes[0].prefetch


def test_a_worker_answers_its_settings_from_its_config_which_no_one_changes(db):
    worker = Worker(queues=["default"], concurrency=2, visibility_timeout=30, poll_interval=0.5)
    config = worker.config
    assert (worker.queues, worker.concurrency, worker.shares) == (("default",), 2, None)
    assert (worker.visibility_timeout, worker.heartbeat_interval) == (30, 10)
    assert (worker.poll_interval, worker.stall_timeout) == (0.5, config.stall_timeout)
    assert worker.prefetch is config.prefetch and worker.worker_id.startswith("worker-")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.worker_id = "another"


def test_a_bad_setting_is_refused_in_the_order_a_reader_meets_them():
    """The pools are checked before the timeouts, and the timeouts before the worker id."""
    with pytest.raises(InvariantError, match="concurrency"):
        WorkerConfig.resolve(
            queues=["default"], concurrency="x=y", visibility_timeout=10, heartbeat_interval=5
        )
    with pytest.raises(InvariantError, match="three"):
        WorkerConfig.resolve(
            queues=["default"], visibility_timeout=10, heartbeat_interval=5, worker_id="w\x00"
        )
    with pytest.raises(InvariantError, match="worker id"):
        WorkerConfig.resolve(queues=["default"], worker_id="w\x00")
