"""Stored payloads rewritten in place, a batch at a time: ``xjobs rotate-keys`` re-encrypts what
an older key sealed, and with ``encrypt_clear`` seals what was written before keys were set
(issue 46). The store walks the sealed (or the clear) payloads of one place in key order and
swaps a batch of them, each fenced on the value it read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from ...payload import JSONValue

#: where a payload is stored: a staged outbox row's input (first: a row the relay publishes
#: meanwhile is then met again in x_jobs), a job's input and result, a finished job's in the
#: history (after x_jobs: a job moved there meanwhile is met again), a step's output, an event's
#: data
PAYLOAD_PLACES = (
    "outbox_input",
    "job_input",
    "job_result",
    "history_input",
    "history_result",
    "step_output",
    "event_data",
)
#: the places a database holds that is not the jobs database: an outbox of OUTBOX_DATABASES,
#: and the events published there (``publish_event(using=...)``)
ALIAS_PLACES = ("outbox_input", "event_data")


@dataclass(frozen=True)
class StoredPayload:
    """One stored payload: its place, its row (a job's, an outbox row's or an event's id, or a
    step's run id and ``name``), its value as stored (a sealed one's wrapper) and, for a job's
    input and result (in x_jobs or the history) and an outbox row's input, the ``job`` it
    belongs to."""

    place: str
    row: UUID
    name: str
    value: JSONValue
    job: str = ""


class PayloadStore(Protocol):
    def sealed(
        self, place: str, *, after: tuple[UUID, str] | None, limit: int, alias: str | None = None
    ) -> list[StoredPayload]:
        """Up to ``limit`` sealed payloads of ``place`` past ``after`` (a row and name, in that
        order), in that order; reads only. ``alias``: the database of an ``ALIAS_PLACES``
        place (None: the jobs database)."""

    def unsealed(
        self, place: str, *, after: tuple[UUID, str] | None, limit: int, alias: str | None = None
    ) -> list[StoredPayload]:
        """As ``sealed``, the payloads of ``place`` stored in clear that sealing would keep
        readable: not null, and of a step only a completed one's value (a sleep's, a waiting
        step's and a call step's records are read as they are stored)."""

    def reseal(
        self, changes: Sequence[tuple[StoredPayload, JSONValue]], alias: str | None = None
    ) -> int:
        """Store each payload's new value where the row still holds the value read (fenced on
        it: a row rewritten meanwhile is left as it is); how many changed."""
