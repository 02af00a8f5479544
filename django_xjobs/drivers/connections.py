"""Bounds on the connections of the worker, relay and scheduler: no database call waits forever.

Two layers (SPEC HANG-01):

* ``bound_connections(aliases)``: libpq options (``XJOBS["CONNECTION_OPTIONS"]``: connect
  timeout, TCP keepalives, ``tcp_user_timeout``) merged under each alias's ``OPTIONS``, so a
  connection the kernel can tell is dead fails instead of blocking. A role's command calls it
  before the first connection opens; ``DATABASES`` options win over the defaults.
* ``role_connections()``: the calling thread is a role thread; its connections get a
  ``statement_timeout`` and ``lock_timeout`` (``XJOBS["STATEMENT_TIMEOUT"]``). Job bodies run on
  other threads and stay unbounded: a long report query is the project's business.

A peer that stops answering but keeps its sockets open (a stalled proxy) defeats both; the
watchdog (worker/watchdog.py) is the bound of last resort.

Behind a transaction-mode pooler (``XJOBS["POOLER"] = "transaction"``) a session outlives no
transaction: a session setting would stay on a server connection the pooler hands to another
client, and a LISTEN would stop hearing once its transaction ends. So ``role_connections()``
sets nothing there (bound the roles with the pooler's ``query_timeout`` or a role's
``ALTER ROLE ... SET statement_timeout``), and ``listen_alias()`` names where a listener may
LISTEN: ``XJOBS["LISTEN_DATABASE"]`` (a direct connection), or nowhere (poll).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from django.db import connections
from django.db.backends.signals import connection_created
from django.dispatch import receiver

from .. import conf
from .postgres import sql

STATEMENTS = sql.load(Path(__file__).parent / "postgres" / "connections.sql")
_local = threading.local()


def bound_connections(aliases: Iterable[str]) -> None:
    """Merge ``XJOBS["CONNECTION_OPTIONS"]`` under the ``OPTIONS`` of each PostgreSQL alias."""
    settings = conf.get()
    options = settings.connection_options
    listen = [settings.listen_database] if settings.listen_database else []
    for alias in dict.fromkeys([*aliases, *listen]):
        settings_dict = connections.settings[alias]
        if "postgresql" not in settings_dict.get("ENGINE", ""):
            continue
        settings_dict["OPTIONS"] = {**options, **settings_dict.get("OPTIONS", {})}
        if alias in connections:  # a wrapper already made on this thread reads its own copy
            wrapper = connections[alias]
            wrapper.settings_dict["OPTIONS"] = {**options, **wrapper.settings_dict["OPTIONS"]}


def pooled() -> bool:
    """Whether the roles' aliases go through a transaction-mode pooler: no session state."""
    return conf.get().pooler == "transaction"


def mark_role_thread() -> None:
    """This thread (a settler, a renewal pool thread) runs only role statements, to its end."""
    _local.bounded = True
    if pooled():  # a session setting would leak to the pooler's next client
        return
    for wrapper in _open_postgres():
        try:
            _bound(wrapper)
        except Exception:
            # The database went away since this connection's last statement (a worker's
            # presence is written on this thread just before its loop starts). A role must
            # not end on it: the connection is closed, and the next statement opens one, bound
            # as it connects (_on_connect), or fails as the outage it is, where the role's own
            # backoff handles it. Raised here, it ended the worker as it started.
            wrapper.close()


T = TypeVar("T")


def as_role(target: Callable[[], T]) -> Callable[[], T]:
    """``target`` to run on a thread of its own, marked as a role thread first."""

    def run() -> T:
        mark_role_thread()
        return target()

    return run


@contextmanager
def role_connections() -> Iterator[None]:
    """Bound this thread's connections while a role runs on it, then hand them back as they
    were (a worker may run on a caller's thread, e.g. a test's)."""
    was = getattr(_local, "bounded", False)
    mark_role_thread()
    try:
        yield
    finally:
        _local.bounded = was
        if not was and not pooled():
            for wrapper in _open_postgres():
                try:
                    with wrapper.cursor() as cursor:
                        cursor.execute(STATEMENTS["unbound_session"])
                except Exception:
                    wrapper.close()  # a connection in doubt is not handed back


def close_stale_connections() -> None:
    """Django's ``close_old_connections()`` for this thread, at the price of the connections
    this thread opened: each one unusable after an error or past ``CONN_MAX_AGE`` is closed,
    and the others are health-checked again at their next use (``CONN_HEALTH_CHECKS``).

    Django's own walks every alias through the per-thread connection registry, a context
    switch each: about 4 microseconds a call with nothing open, and a worker calls it before
    every job a thread takes and after every lease renewal. Only a connection that has connected can be stale, and every connect is
    seen here (``connection_created``), on the thread that made it: the thread's own
    connection of each alias, as Django's walk finds it."""
    try:
        connected = _local.connected
    except AttributeError:  # once a thread: a miss costs more than the walk it saves
        connected = _local.connected = {}
    for wrapper in connected.values():
        wrapper.close_if_unusable_or_obsolete()


def open_transactions() -> list[Any]:
    """This thread's connections inside an open transaction, to lend a job body's own thread
    (``borrowed``). Only a test's transaction is ever open there (a ``db`` test, a
    ``TestCase``): no transaction of the library is open while a body runs, so a worker's job
    thread lends nothing."""
    return [
        wrapper for wrapper in connections.all(initialized_only=True) if wrapper.in_atomic_block
    ]


@contextmanager
def borrowed(wrappers: list[Any]) -> Iterator[None]:
    """Use another thread's ``wrappers`` as this thread's connections of their aliases: a body
    given a thread of its own for its timeout sees and writes in the test's transaction, as it
    would on the test's thread (the testing guide promises that a job sees the test's
    uncommitted rows; its step records too). On the way out they are handed back, never
    closed: they are the lender's."""
    for wrapper in wrappers:
        wrapper.inc_thread_sharing()
        connections[wrapper.alias] = wrapper
    try:
        yield
    finally:
        for wrapper in wrappers:
            del connections[wrapper.alias]
            wrapper.dec_thread_sharing()


@receiver(connection_created)
def _on_connect(sender: Any, connection: Any, **kwargs: Any) -> None:
    # the thread's own connection of its alias (a wrapper made apart, by create_connection,
    # is not Django's to close either); a newer one of the alias replaces the older
    if any(wrapper is connection for wrapper in connections.all(initialized_only=True)):
        if not hasattr(_local, "connected"):
            _local.connected = {}
        _local.connected[connection.alias] = connection
    if (
        getattr(_local, "bounded", False)
        and not pooled()
        and connection.vendor == "postgresql"
        and connection.alias in _role_aliases()
    ):
        _bound(connection)


def _bound(wrapper: Any) -> None:
    milliseconds = str(max(1, round(conf.get().statement_timeout * 1000)))
    with wrapper.cursor() as cursor:
        cursor.execute(
            STATEMENTS["bound_session"], {"statement_ms": milliseconds, "lock_ms": milliseconds}
        )


def _open_postgres() -> list[Any]:
    """This thread's open connections to the databases the roles use (the jobs' and the
    outboxes'): a role never touches the caller's other databases."""
    return [
        wrapper
        for wrapper in connections.all(initialized_only=True)
        if wrapper.vendor == "postgresql"
        and wrapper.connection is not None
        and wrapper.alias in _role_aliases()
    ]


def _role_aliases() -> set[str]:
    settings = conf.get()
    return {settings.database, *settings.outbox_databases}
