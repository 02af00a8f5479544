"""A misspelt setting or queue is answered with the name it is close to (issue 42): the
refusal was already one coded line, and now its hint says which name was meant."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from django_xjobs import conf
from django_xjobs.backends.tasks import InvalidTask
from django_xjobs.errors import ConfigInvalidError, QueueUnknownError
from tests import jobs, tasks


def test_a_misspelt_xjobs_key_is_answered_with_the_key():
    with pytest.raises(ConfigInvalidError) as caught:
        conf.validate({"VISIBILTY_TIMEOUT": "30s", "DATABSE": "default"})
    assert "'VISIBILTY_TIMEOUT': did you mean 'VISIBILITY_TIMEOUT'?" in caught.value.hint
    assert "'DATABSE': did you mean 'DATABASE'?" in caught.value.hint


def test_a_misspelt_limits_key_is_answered_with_the_key():
    with pytest.raises(ConfigInvalidError) as caught:
        conf.validate({"LIMITS": {"per_queu": {"default": 2}}})
    assert "did you mean 'per_queue'?" in caught.value.hint


def test_enqueue_to_a_misspelt_queue_is_answered_with_the_queue(harness):
    with (
        override_settings(XJOBS={"QUEUES": ["emails"]}),
        pytest.raises(QueueUnknownError) as caught,
    ):
        jobs.ok.using(queue="emials").enqueue(n=1)
    assert "did you mean 'emails'?" in caught.value.hint
    assert harness.driver.reads().list_jobs() == []


def test_a_task_on_a_misspelt_queue_is_answered_with_the_queue():
    with pytest.raises(InvalidTask) as caught:
        tasks.add.using(queue_name="othr")
    assert "did you mean 'other'?" in caught.value.hint  # type: ignore[attr-defined]


def test_a_worker_told_a_misspelt_queue_is_answered_with_the_queue():
    with override_settings(XJOBS={"QUEUES": ["emails"]}), pytest.raises(CommandError) as caught:
        call_command("xjobs_worker", "--queues", "emials", "--burst")
    assert "'emials': did you mean 'emails'?" in str(caught.value)
    assert "\n" not in str(caught.value)
