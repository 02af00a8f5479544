"""Which driver this process uses: ``XJOBS["DRIVER"]`` unless a test installed another."""

from __future__ import annotations

import threading
from typing import Any

from .. import conf
from .base import JobDriver

_installed: list[Any] = []
_default: dict[tuple[str, str], JobDriver] = {}
_lock = threading.Lock()


def get_driver() -> JobDriver:
    """The driver enqueue, the worker and the operator API talk to, looked up at call time."""
    if _installed:
        installed: JobDriver = _installed[-1]
        return installed
    settings = conf.get()
    key = (settings.driver, settings.database)
    with _lock:
        if key not in _default:
            if settings.driver == "memory":
                from .memory import MemoryDriver

                _default[key] = MemoryDriver()
            else:
                from .postgres import PostgresDriver

                _default[key] = PostgresDriver(using=settings.database)
        return _default[key]


def install(driver: JobDriver) -> None:
    """Use ``driver`` until ``uninstall`` (tests: see ``django_xjobs.testing``)."""
    _installed.append(driver)


def uninstall(driver: JobDriver) -> None:
    _installed.remove(driver)
