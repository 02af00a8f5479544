"""A row's name is data: with ``TASKS`` set, a worker and the admin's filter import it only
when it names a module of an installed app, and the names that resolved to nothing are
remembered up to a bound (issue 26, item 5)."""

from __future__ import annotations

import sys

import pytest

from django_xjobs.backends import tasks as djtasks
from django_xjobs.declarations import registry


@pytest.fixture(autouse=True)
def fresh():
    djtasks.forget()
    yield
    djtasks.forget()


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("tests.tasks.add", True),  # the app "tests"
        ("tests.add", True),  # the app's package itself
        ("django_xjobs.operations.cancel_job", True),
        ("os.system", False),
        ("testsuite.tasks.add", False),  # a prefix of the name is not the app
        ("subprocess.run", False),
        ("tests", False),
        ("tests..x", False),
    ],
)
def test_only_names_in_installed_apps_are_importable(name, allowed):
    assert djtasks.importable(name) is allowed


def test_a_name_outside_every_app_is_never_imported(monkeypatch):
    """``xml.dom.minidom`` imports cleanly, so only the rule keeps it out of the process."""
    monkeypatch.delitem(sys.modules, "xml.dom.minidom", raising=False)
    assert registry.get_job("xml.dom.minidom.parseString") is None
    assert "xml.dom.minidom" not in sys.modules


def test_a_task_of_an_installed_app_is_still_found():
    from tests import tasks

    handle = registry.get_job(tasks.add.module_path)
    assert handle is not None and handle.task.func is tasks.add.func


def test_the_misses_remembered_are_bounded(monkeypatch):
    monkeypatch.setattr(djtasks, "MISSES_KEPT", 5)
    for n in range(20):
        assert registry.get_job(f"tests.tasks.no_such_task_{n}") is None
    assert list(djtasks._misses) == [f"tests.tasks.no_such_task_{n}" for n in range(15, 20)]
