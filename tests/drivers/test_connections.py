"""A job thread's connection hygiene before each run (DESIGN: one connection per thread,
``close_old_connections`` around each job): ``close_stale_connections`` closes exactly what
Django's ``close_old_connections`` would, looking only at the connections the thread opened."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import close_old_connections, connections

from django_xjobs.drivers.connections import close_stale_connections

pytestmark = pytest.mark.django_db(transaction=True)


def on_a_thread(body: Callable[[], Any]) -> Any:
    """``body``'s answer, run on a thread of its own (its own connections), closed after."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = body()
        except BaseException as error:  # re-raised on the test's thread
            box["error"] = error
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def open_wrapper() -> Any:
    wrapper = connections["default"]
    wrapper.ensure_connection()
    return wrapper


@pytest.mark.parametrize("close", [close_stale_connections, close_old_connections])
def test_a_connection_past_its_age_is_closed_and_a_fresh_one_kept_for_a_health_check(close):
    """The two functions answer alike: past CONN_MAX_AGE closed; within it kept, and checked
    again at its next use."""

    def body() -> tuple[bool, bool, bool]:
        wrapper = open_wrapper()
        wrapper.close_at = time.monotonic() + 60
        wrapper.health_check_done = True
        close()
        kept, rechecked = wrapper.connection is not None, not wrapper.health_check_done
        wrapper.close_at = time.monotonic() - 1
        close()
        return kept, rechecked, wrapper.connection is None

    assert on_a_thread(body) == (True, True, True)


@pytest.mark.parametrize("close", [close_stale_connections, close_old_connections])
def test_a_connection_the_server_dropped_after_an_error_is_closed(close):
    def body() -> bool:
        wrapper = open_wrapper()
        pid = wrapper.connection.info.backend_pid
        with connections.create_connection("default").cursor() as other:
            other.execute("SELECT pg_terminate_backend(%s)", [pid])
            other.connection.close()
        wrapper.errors_occurred = True  # as a failed query of a handler leaves it
        close()
        return wrapper.connection is None

    assert on_a_thread(body) is True


def test_a_thread_that_opened_nothing_has_nothing_to_close():
    def body() -> list[Any]:
        close_stale_connections()
        return connections.all(initialized_only=True)

    assert on_a_thread(body) == []  # it made no connection wrapper by looking


def test_a_connection_opened_again_is_the_one_checked():
    """Closed and reopened, the alias's connection is checked once, as it is now."""

    def body() -> bool:
        wrapper = open_wrapper()
        wrapper.close()
        wrapper = open_wrapper()
        wrapper.close_at = time.monotonic() - 1
        close_stale_connections()
        return wrapper.connection is None

    assert on_a_thread(body) is True


def test_a_connection_made_apart_is_left_to_its_maker():
    """A wrapper made by create_connection is not the thread's: neither function closes it,
    and it does not hide the thread's own connection from the check."""

    def body() -> tuple[bool, bool]:
        own = open_wrapper()
        apart = connections.create_connection("default")
        apart.ensure_connection()
        try:
            own.close_at = apart.close_at = time.monotonic() - 1
            close_stale_connections()
            return own.connection is None, apart.connection is not None
        finally:
            apart.close()

    assert on_a_thread(body) == (True, True)
