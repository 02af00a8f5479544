"""Key rotation (issue 46): every stored payload sealed with a key that is no longer first in
``XJOBS["ENCRYPTION_KEYS"]`` re-encrypted under the first, a batch at a time, audited; with
``encrypt_clear``, every payload written in clear before the keys were set sealed too.

    rotate_keys(by="ops:alice")                      # KeyRotation(checked=..., rotated=..., ...)
    rotate_keys(encrypt_clear=True, by="ops:alice")  # ... and encrypted=...

Each batch is one read of a place's payloads past the last one seen and one fenced write of
those that need it: no statement locks more than a batch, and a payload rewritten meanwhile (a
settle, a replace) is left as it is and counted ``skipped``. A payload no key opens is left as
it is and counted ``unreadable``: rotation never drops a row it cannot read. The places are a
staged outbox row's input, a job's input and result (in x_jobs and in the history), a step's
output and an event's data; the outbox and the events of each of ``OUTBOX_DATABASES`` as well as
the jobs database's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .. import conf, crypt
from ..conf.encryption import Keyring
from ..declarations.registry import jobs as declared_jobs
from ..drivers import get_driver
from ..drivers.contract import ALIAS_PLACES, PAYLOAD_PLACES, PayloadStore, StoredPayload
from ..errors import ConfigInvalidError, InvariantError
from ..payload import JSONValue, dumps
from ..text import check_label
from . import audit
from .answers import Answer

#: payloads read (and at most rewritten) per statement unless ``batch`` says otherwise
DEFAULT_BATCH = 500
MAX_BATCH = 10_000
#: the places whose payload is a job's (its input, its result, in x_jobs or the history, its
#: outbox copy): sealed only for a job declared here without ``encrypt=False``
JOB_PLACES = ("outbox_input", "job_input", "job_result", "history_input", "history_result")


@dataclass(frozen=True, eq=False)
class KeyRotation(Answer):
    """What ``rotate_keys`` did (or, with ``dry_run``, would do): ``checked`` sealed payloads,
    ``rotated`` re-encrypted under the first key, ``current`` already under it, ``unreadable``
    ones no listed key opens (left as they are), ``skipped`` ones rewritten meanwhile, in
    ``batches`` reads. With ``encrypt_clear``: ``encrypted`` clear payloads sealed, and
    ``left_clear`` ones kept clear (a job declared ``encrypt=False``, a ``django.tasks`` task's,
    or one of a job this process does not declare)."""

    dry_run: bool
    checked: int
    rotated: int
    current: int
    unreadable: int
    skipped: int
    batches: int
    encrypt_clear: bool = False
    encrypted: int = 0
    left_clear: int = 0


@dataclass
class _Tally:
    checked: int = 0
    rotated: int = 0
    current: int = 0
    unreadable: int = 0
    skipped: int = 0
    batches: int = 0
    encrypted: int = 0
    left_clear: int = 0


def rotate_keys(
    *,
    batch: int = DEFAULT_BATCH,
    by: str | None = None,
    dry_run: bool = False,
    encrypt_clear: bool = False,
) -> KeyRotation:
    """Re-encrypt every staged outbox input, job input, result, step output and event's data
    sealed with an older key under the first of ``XJOBS["ENCRYPTION_KEYS"]`` (SPEC CRYPT-07,
    CRYPT-12); once it reports no ``unreadable`` and no ``skipped``, the older keys can leave
    the list. ``encrypt_clear=True`` also seals each such payload stored in clear, written
    before the keys were set, unless its job is declared ``encrypt=False`` (SPEC CRYPT-13)."""
    keys = conf.get().encryption
    if keys is None:
        raise ConfigInvalidError(
            'rotate_keys needs XJOBS["ENCRYPTION_KEYS"]: nothing is encrypted without it',
            hint="list the new key first and the old ones after it, then rotate",
        )
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise InvariantError(f"batch={batch!r} must be an integer from 1 to {MAX_BATCH:,}")
    if by is not None and not isinstance(by, str):
        raise InvariantError(f"by={by!r} must be a string or None", hint='e.g. "ops:alice"')
    if not isinstance(encrypt_clear, bool):
        raise InvariantError(f"encrypt_clear={encrypt_clear!r} must be True or False")
    check_label(by, "by")
    store = get_driver().jobs().payloads()
    tally = _Tally()
    for place, alias in _places():
        _rotate(store, place, alias, keys, batch, dry_run, tally)
        if encrypt_clear:
            _encrypt(store, place, alias, keys, batch, dry_run, tally)
    if not dry_run:  # SPEC AUDIT-01: an action that changes rows is recorded; a look is not
        audit.record(
            "rotate_keys",
            by=by,
            target=f"key {keys.fingerprints[0]}" + (", clear rows too" if encrypt_clear else ""),
            counts=(
                tally.checked + tally.encrypted + tally.left_clear,
                tally.rotated + tally.encrypted,
                tally.skipped + tally.unreadable,
            ),
        )
    return KeyRotation(
        dry_run,
        tally.checked,
        tally.rotated,
        tally.current,
        tally.unreadable,
        tally.skipped,
        tally.batches,
        encrypt_clear,
        tally.encrypted,
        tally.left_clear,
    )


def _places() -> Iterator[tuple[str, str | None]]:
    """Each place with the database it is read in (None: the jobs database's own); an outbox
    and its events in each other database of ``OUTBOX_DATABASES`` too."""
    settings = conf.get()
    others = [a for a in settings.outbox_databases if a != settings.database]
    if get_driver().database is None:
        others = []  # a store that is no database holds one outbox and one event list
    for place in PAYLOAD_PLACES:
        yield place, None
        if place in ALIAS_PLACES:
            for alias in others:
                yield place, alias


def _rotate(
    store: PayloadStore,
    place: str,
    alias: str | None,
    keys: Keyring,
    batch: int,
    dry_run: bool,
    tally: _Tally,
) -> None:
    after = None
    while found := store.sealed(place, after=after, limit=batch, alias=alias):
        tally.batches += 1
        tally.checked += len(found)
        after = (found[-1].row, found[-1].name)
        changes: list[tuple[StoredPayload, JSONValue]] = []
        for payload in found:
            token = payload.value.get(crypt.MARK) if isinstance(payload.value, dict) else None
            if not isinstance(token, str):
                tally.unreadable += 1
            elif keys.current(token):
                tally.current += 1
            elif (sealed := keys.rotate(token)) is None:
                tally.unreadable += 1
            else:
                changes.append((payload, {crypt.MARK: sealed}))
        _swap(store, changes, alias, dry_run, tally, "rotated")


def _encrypt(
    store: PayloadStore,
    place: str,
    alias: str | None,
    keys: Keyring,
    batch: int,
    dry_run: bool,
    tally: _Tally,
) -> None:
    after = None
    while found := store.unsealed(place, after=after, limit=batch, alias=alias):
        tally.batches += 1
        after = (found[-1].row, found[-1].name)
        changes: list[tuple[StoredPayload, JSONValue]] = []
        for payload in found:
            if place in JOB_PLACES and not _sealed_job(payload.job):
                tally.left_clear += 1
            else:
                changes.append((payload, {crypt.MARK: keys.encrypt(dumps(payload.value))}))
        _swap(store, changes, alias, dry_run, tally, "encrypted")


def _sealed_job(name: str) -> bool:
    """Whether a job's payloads are sealed: a job declared here, not ``encrypt=False`` (a
    ``django.tasks`` task's row stays clear, and an undeclared job's is left as written)."""
    declared = declared_jobs.get(name)
    return declared is not None and bool(declared.encrypt)


def _swap(
    store: PayloadStore,
    changes: list[tuple[StoredPayload, JSONValue]],
    alias: str | None,
    dry_run: bool,
    tally: _Tally,
    field: str,
) -> None:
    if dry_run or not changes:
        setattr(tally, field, getattr(tally, field) + (len(changes) if dry_run else 0))
        return
    changed = store.reseal(changes, alias=alias)
    setattr(tally, field, getattr(tally, field) + changed)
    tally.skipped += len(changes) - changed
