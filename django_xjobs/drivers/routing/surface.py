"""The operator surface's reads one database at a time (issue 48 item 4): the metrics, the admin's
queues page and overview show each jobs database's queues under its alias, and a database that
does not answer as down beside the others' figures (SPEC SHARD-20), where the operator API's merged
reads raise ``X_ALIAS_UNAVAILABLE`` instead."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from ...errors import AliasUnavailableError
from ..contract import JobDriver
from . import RoutingDriver
from .place import answering, is_down

T = TypeVar("T")

__all__ = ["AliasAnswer", "is_down", "per_alias"]


@dataclass(frozen=True)
class AliasAnswer(Generic[T]):
    """One jobs database's answer: ``answer`` None and ``problem`` its error when it is down."""

    alias: str
    answer: T | None
    problem: str | None = None


def per_alias(driver: JobDriver, read: Callable[[JobDriver], T]) -> list[AliasAnswer[T]] | None:
    """``read`` of each jobs database, the jobs database first, or None when ``driver`` does not
    route (one database: the caller reads it as it always did). A database that does not answer
    is answered as down (its connection closed, ``xjobs.route.alias_down`` logged) and the
    others are still read; any other error passes."""
    if not isinstance(driver, RoutingDriver):
        return None
    answers: list[AliasAnswer[T]] = []
    for alias, each in driver.place.drivers.items():
        try:
            with answering(alias):
                answers.append(AliasAnswer(alias, read(each)))
        except AliasUnavailableError as error:
            driver.place.passed_over(alias, error, what="read")
            answers.append(AliasAnswer(alias, None, error.message))
    return answers
