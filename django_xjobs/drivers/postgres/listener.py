"""LISTEN for notifications on a real session, or say why this process polls instead (a
transaction pooler keeps no session to listen on; SPEC pooler notes, docs/howto/pgbouncer.md)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import connections

from ... import conf, log
from ... import log as events
from ...errors import first_line
from .. import failures

_polling: set[tuple[str, str]] = set()  # (alias, channel) whose fallback was logged


def listen_alias(alias: str, channel: str) -> str | None:
    """Where to LISTEN for notifications on ``alias``'s tables: ``alias`` itself when it is a
    real session, ``XJOBS["LISTEN_DATABASE"]`` for the jobs database, else None: poll, which
    is logged once per process and channel so the slower wake-up is not a mystery."""
    settings = conf.get()
    if settings.listen_database is not None and alias == settings.database:
        return settings.listen_database
    if conf.get().pooler != "transaction":  # a real session to listen on
        return alias
    if (alias, channel) not in _polling:
        _polling.add((alias, channel))
        log.event(
            logging.WARNING,
            "xjobs.listener.polling",
            database=alias,
            channel=channel,
            reason="transaction pooler",
            hint='set XJOBS["LISTEN_DATABASE"] to a direct alias to be woken at once',
        )
    return None


class Polling:
    """No listener: nowhere to LISTEN (a transaction pooler and no ``LISTEN_DATABASE``), so the
    worker's poll interval is its only wake-up."""

    def stop(self) -> None:
        pass


class Listener(threading.Thread):
    """LISTEN to ``channel`` on a connection of its own; call ``callback`` for each notification
    whose payload is in ``payloads`` (any payload when None), and once when it starts listening.
    ``controls``, a (channel, callback) pair, is listened to on the same connection: its
    callback runs for each of its notifications, and once on listening too. ``urgent`` is called
    with the queue and the priority of each ``"<queue> <priority>"`` payload of a queue in
    ``payloads`` (a ready job above priority 0, SPEC PRIO-01); without it those are ignored.

    Polling stays the safety net: a lost notification only costs one poll interval.
    """

    def __init__(
        self,
        using: str,
        channel: str,
        callback: Callable[[], None],
        payloads: set[str] | None = None,
        *,
        controls: tuple[str, Callable[[], None]] | None = None,
        urgent: Callable[[str, int], None] | None = None,
    ) -> None:
        super().__init__(name=f"xjobs-listen-{channel}", daemon=True)
        self.using, self.channel, self.callback, self.payloads = using, channel, callback, payloads
        self.controls, self.urgent = controls, urgent
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            wrapper = connections.create_connection(self.using)
            try:
                wrapper.ensure_connection()
                raw = wrapper.connection
                raw.autocommit = True
                raw.execute(f"LISTEN {self.channel}")
                if self.controls is not None:
                    raw.execute(f"LISTEN {self.controls[0]}")
                    self.controls[1]()  # a pause or resume told while we were not listening
                self.callback()  # anything staged while we were not listening
                while not self._halt.is_set():
                    for note in raw.notifies(timeout=0.5):
                        if self.controls is not None and note.channel == self.controls[0]:
                            self.controls[1]()
                        elif self.payloads is None or note.payload in self.payloads:
                            self.callback()
                        elif self.urgent is not None and " " in note.payload:
                            self._urgent(note.payload)
            except Exception as error:  # raw psycopg errors too: this is not a Django cursor
                events.throttled(  # it retries every second: once per kind of error
                    logging.WARNING,
                    "xjobs.listener.failed",
                    kind=failures.sqlstate(error) or type(error).__name__,
                    channel=self.channel,
                    error=first_line(error),
                )
            finally:
                wrapper.close()
            self._halt.wait(1.0)
        # what a callback opened on this thread (a worker's urgent claim, SPEC PRIO-01) closes
        # with it, not when the interpreter gets round to it
        connections.close_all()

    def _urgent(self, payload: str) -> None:
        assert self.urgent is not None
        queue, _, priority = payload.partition(" ")
        if (self.payloads is None or queue in self.payloads) and priority.lstrip("-").isdigit():
            self.urgent(queue, int(priority))

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)
