"""Stored payloads rewritten in place, a batch at a time: ``xjobs rotate-keys`` re-encrypts what
an older key sealed (issue 46). The store walks the sealed payloads of one place in key order and
swaps a batch of them, each fenced on the value it read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from ...payload import JSONValue

#: where a payload is stored: a job's input, its result, a step's output
PAYLOAD_PLACES = ("job_input", "job_result", "step_output")


@dataclass(frozen=True)
class StoredPayload:
    """One stored payload: its place, its row (a job's id, or a step's run id and ``name``) and
    its value as stored (a sealed one's wrapper)."""

    place: str
    row: UUID
    name: str
    value: JSONValue


class PayloadStore(Protocol):
    def sealed(
        self, place: str, *, after: tuple[UUID, str] | None, limit: int
    ) -> list[StoredPayload]:
        """Up to ``limit`` sealed payloads of ``place`` past ``after`` (a row and name, in that
        order), in that order; reads only."""

    def reseal(self, changes: Sequence[tuple[StoredPayload, JSONValue]]) -> int:
        """Store each payload's new value where the row still holds the value read (fenced on
        it: a row rewritten meanwhile is left as it is); how many changed."""
