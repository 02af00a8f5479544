"""Which driver this process uses: ``XJOBS["DRIVER"]`` unless a test installed another."""

from __future__ import annotations

import threading
from typing import Any

from .. import conf
from ..clock import Clock
from ..conf.routing import Routing
from ..errors import InvariantError
from .contract import JobDriver

_installed: list[Any] = []
_default: dict[tuple[object, ...], JobDriver] = {}
_lock = threading.Lock()


def get_driver() -> JobDriver:
    """The driver enqueue, the worker and the operator API talk to, looked up at call time."""
    if _installed:
        installed: JobDriver = _installed[-1]
        return installed
    settings = conf.get()
    routing = settings.routing
    if routing is not None:  # jobs in several databases (issue 48): nothing changes without
        return _routed(settings.driver, routing)
    key: tuple[object, ...] = (settings.driver, settings.database)
    with _lock:
        if key not in _default:
            _default[key] = create(settings.driver, using=settings.database)
        return _default[key]


def _routed(kind: str, routing: Routing) -> JobDriver:
    """One driver of ``kind`` per alias behind the routing driver (the memory driver routes
    too: one store per alias, SPEC SHARD-01)."""
    from .routing import RoutingDriver

    key = (kind, routing.default, routing.aliases, tuple(routing.queues.items()), routing.router)
    with _lock:
        if key not in _default:
            drivers = {alias: create(kind, using=alias) for alias in routing.aliases}
            _default[key] = RoutingDriver(routing, drivers)
        return _default[key]


def create(kind: str, *, using: str = "default", clock: Clock | None = None) -> JobDriver:
    """A new driver of ``kind``: ``"postgres"`` on database alias ``using``, or ``"memory"``
    (in process, on ``clock``). The one place a concrete driver is built, so nothing outside
    ``drivers/`` names one::

        driver = create("memory")
    """
    if kind == "memory":
        from .memory import MemoryDriver

        return MemoryDriver(clock=clock)
    if kind == "postgres":
        from .postgres import PostgresDriver

        return PostgresDriver(using=using)
    raise InvariantError(f"no driver named {kind!r}", hint='use "postgres" or "memory"')


def install(driver: JobDriver) -> None:
    """Use ``driver`` until ``uninstall`` (tests: see ``django_xjobs.testing``)."""
    _installed.append(driver)


def uninstall(driver: JobDriver) -> None:
    _installed.remove(driver)


def follow_frozen_time() -> None:
    """Tests: make the database's ``now()`` follow freezegun (``django_xjobs.testing`` calls
    this on import; the memory driver reads the patched Python clock already)."""
    from .postgres import frozen

    frozen.install()


def catch_up_frozen_time() -> None:
    """Tests: follow freezegun on a connection already open too."""
    from .postgres import frozen

    frozen.catch_up()
