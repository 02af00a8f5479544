"""What crosses the driver on the way in and out of a run: an enqueue request and its
answer, and the claimed job a worker runs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any
from uuid import UUID

from ...crypt import KEY_MISSING, is_sealed, unseal
from ...errors import EncryptionKeyMissingError, InputInvalidError
from ...payload import NotJSON, decode
from ...text import check_name
from ..values import quick_init


@quick_init
@dataclass(frozen=True)
class EnqueueRequest:
    """One job to insert. ``run_at`` wins over ``delay``; neither means now. ``id`` is the id a
    staged enqueue minted and already returned to its caller; ``None`` lets the driver mint it."""

    name: str
    queue: str
    input: dict[str, Any]
    input_json: str
    idempotency_key: str
    max_attempts: int
    priority: int = 0
    run_at: datetime | None = None
    delay: float | None = None
    tenant_id: str | None = None
    enqueued_by: str | None = None
    traceparent: str | None = None
    id: UUID | None = None
    #: not started by then, it never runs (stop reason ``expired``); ``expires_in`` is the same
    #: counted in seconds from when the job falls due, on the store's clock (issue 29)
    expires_at: datetime | None = None
    expires_in: float | None = None
    #: a waiting, never-started holder of the key takes this request's input, run time and
    #: expiry instead of a new row (``on_conflict="replace"``, debounce); any other holder
    #: dedupes as ever
    replace: bool = False
    #: the jobs this one waits for (``using(after=...)``, issue 32): it runs once all are done,
    #: and ends ``dependency_failed`` if one ends otherwise, unless ``run_anyway``
    after: tuple[UUID, ...] | None = None
    run_anyway: bool = False

    def __post_init__(self) -> None:
        # every enqueue path builds one of these: a NUL or a lone surrogate in a stored name
        # is refused with its code here, not as a raw DataError from the insert (issue 24 §4)
        check_name(self.idempotency_key, "the idempotency key", error=InputInvalidError)
        check_name(self.tenant_id, "tenant_id", error=InputInvalidError)
        check_name(self.enqueued_by, "enqueued_by", error=InputInvalidError)

    def for_input(
        self,
        input: Mapping[str, object],
        input_json: str,
        idempotency_key: str,
        tenant_id: str | None,
    ) -> EnqueueRequest:
        """This request with another input, key and tenant: what one job's enqueue builds per
        element from the fields its call shares. Equal to constructing it; only the two names
        that change are checked again (the rest were, when this one was made). A frozen
        dataclass sets each of its 20 fields through ``object.__setattr__``, which made its
        construction a tenth of ``enqueue_many``'s Python; this is one dict update."""
        check_name(idempotency_key, "the idempotency key", error=InputInvalidError)
        check_name(tenant_id, "tenant_id", error=InputInvalidError)
        return self._with(
            input=input, input_json=input_json, idempotency_key=idempotency_key, tenant_id=tenant_id
        )

    def with_id(self, job_id: UUID) -> EnqueueRequest:
        """This request with the id a staged enqueue minted for it (``dataclasses.replace``
        would construct the whole frozen dataclass again, once per staged enqueue)."""
        return self._with(id=job_id)

    def _with(self, **changes: object) -> EnqueueRequest:
        """A copy with ``changes`` (fields that need no check), as one dict update."""
        made = object.__new__(EnqueueRequest)
        fields = made.__dict__
        fields.update(self.__dict__)
        fields.update(changes)
        return made


@quick_init
@dataclass(frozen=True)
class ClaimedJob:
    """A row this worker now holds: ``lease_token`` fences every write it makes (DESIGN Q-01)."""

    id: UUID
    run_id: UUID
    name: str
    queue: str
    input: dict[str, Any]
    attempt: int
    max_attempts: int
    lease_token: UUID
    priority: int
    tenant_id: str | None
    enqueued_by: str | None
    idempotency_key: str
    created_at: datetime
    #: runs in a row that died alone, in the child process that isolated them, before this
    #: claim: the crash count MAX_LEASE_EXPIRIES bounds (0 for a normal claim)
    lease_expiries: int = 0
    traceparent: str | None = None
    #: why the stored input could not be decoded (``input`` is then empty): the run settles
    #: dead with ``X_JOB_UNDECODABLE`` and never starts; None for every readable row
    undecodable: str | None = None
    #: its first claim came after its ``expires_at``: it settles dead with stop reason
    #: ``expired`` and the handler never starts (issue 29)
    expired: bool = False
    #: snoozes this job already made (``ctx.snooze`` refuses past its bound)
    snoozes: int = 0
    #: seconds from its due time (``run_at``) to this claim, on the store's clock: the wait
    #: behind ``xjobs_job_wait_seconds``
    waited: float = 0.0
    #: the worker its last run died with, that death not yet pinned on it (issue 39): every run
    #: of a dead worker shares its death, so this one runs alone next; None for most claims
    died_with: str | None = None
    #: the version of its job's code the run started under (issue 44): stamped at its first
    #: claim from the claiming worker's declaration; 1 for a run claimed before runs recorded it
    version: int = 1

    @property
    def suspect(self) -> bool:
        """True when this run must run alone: its last run died with its worker, or died alone
        before (a counted crash)."""
        return self.died_with is not None or self.lease_expiries > 0


@dataclass(frozen=True)
class DeclaredVersions:
    """What a worker's claim is told of the jobs it declares (issue 44): by name, each job's
    version and whether it parks older runs (``old_runs="park"``). Its claim stamps a run's
    version at its first claim, never takes a run started under a newer version (SPEC VER-05),
    and leaves to others an older run it parked already (SPEC VER-08). A name it does not hold
    is claimed as ever."""

    jobs: Mapping[str, tuple[int, bool]]

    @cached_property
    def json(self) -> str:
        """The map as the claim statements read it: ``{name: [version, parks]}``."""
        return json.dumps({name: [v, parks] for name, (v, parks) in self.jobs.items()})

    def stamp(self, name: str, version: int | None, started: bool) -> int | None:
        """The version a claim leaves on a run: its own once stamped, 1 for a run first
        claimed before runs recorded one, else this worker's (None: a job it does not hold)."""
        if version is not None:
            return version
        if started:
            return 1
        declared = self.jobs.get(name)
        return None if declared is None else declared[0]

    def honours(self, name: str, version: int | None, parked: bool) -> bool:
        """Whether this worker's claim may take the run (jobs.sql's waiting_rows)."""
        declared = self.jobs.get(name)
        if version is None or declared is None:
            return True
        mine, parks = declared
        return version <= mine and not (parked and parks and version < mine)


#: a claim told nothing of the worker's jobs: every run is taken, none stamped
NO_VERSIONS = DeclaredVersions({})


def claimed_input(stored: object) -> tuple[dict[str, Any], str | None]:
    """A claimed row's stored input (JSON text) as the handler's inputs, or ``({}, reason)``
    when this process cannot read it: each row is decoded on its own, so one that another
    version or hand-written SQL left too deep to decode fails alone, not its whole claim."""
    try:
        value = decode(stored)
    except NotJSON as error:
        return {}, f"its stored input {error.reason}"
    if is_sealed(value):  # XJOBS["ENCRYPTION_KEYS"]: opened here, row by row, as it is decoded
        try:
            value = unseal(value)
        except EncryptionKeyMissingError:
            return {}, KEY_MISSING
    return value, None


@quick_init
@dataclass(frozen=True)
class EnqueueResult:
    """What an enqueue did.

    ``id`` is always the job's id. ``deduped`` is True when a live job with the same key already
    existed (its ids are returned). ``staged`` is True when the job waits in the outbox for the
    caller's transaction to commit: its id was minted at staging and the publish inserts the job
    with it, ``run_id`` is None and ``deduped`` is None — unknown until the publish, which may
    collapse it into a live duplicate (``inspect_job`` then answers for that job). ``replaced``
    is True when a waiting job took this enqueue's input (``on_conflict="replace"``, debounce)::

        result = send_receipt.enqueue(order_id=7)
        inspect_job(result.id)["state"]  # "ready"
    """

    id: UUID
    run_id: UUID | None
    deduped: bool | None = False
    staged: bool = False
    #: the live job was waiting and took this enqueue's input and run time
    #: (``on_conflict="replace"`` or a debounced job); ``deduped`` is True too
    replaced: bool = False
