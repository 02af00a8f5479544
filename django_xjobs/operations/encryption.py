"""Key rotation (issue 46): every stored payload sealed with a key that is no longer first in
``XJOBS["ENCRYPTION_KEYS"]`` re-encrypted under the first, a batch at a time, audited.

    rotate_keys(by="ops:alice")   # KeyRotation(checked=..., rotated=..., ...)

Each batch is one read of the store's sealed payloads past the last one seen and one fenced
write of those that need it: no statement locks more than a batch, and a payload rewritten
meanwhile (a settle, a replace) is left as it is and counted ``skipped``. A payload no key
opens is left as it is and counted ``unreadable``: rotation never drops a row it cannot read.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import conf, crypt
from ..drivers import get_driver
from ..drivers.contract import PAYLOAD_PLACES, StoredPayload
from ..errors import ConfigInvalidError, InvariantError
from ..payload import JSONValue
from ..text import check_label
from . import audit
from .answers import Answer

#: payloads read (and at most rewritten) per statement unless ``batch`` says otherwise
DEFAULT_BATCH = 500
MAX_BATCH = 10_000


@dataclass(frozen=True, eq=False)
class KeyRotation(Answer):
    """What ``rotate_keys`` did (or, with ``dry_run``, would do): ``checked`` sealed payloads,
    ``rotated`` re-encrypted under the first key, ``current`` already under it, ``unreadable``
    ones no listed key opens (left as they are), ``skipped`` ones rewritten meanwhile, in
    ``batches`` reads."""

    dry_run: bool
    checked: int
    rotated: int
    current: int
    unreadable: int
    skipped: int
    batches: int


def rotate_keys(
    *, batch: int = DEFAULT_BATCH, by: str | None = None, dry_run: bool = False
) -> KeyRotation:
    """Re-encrypt every job input, result and step output sealed with an older key under the
    first of ``XJOBS["ENCRYPTION_KEYS"]`` (SPEC CRYPT-07); once it reports no ``unreadable``
    and no ``skipped``, the older keys can leave the list."""
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
    check_label(by, "by")
    store = get_driver().jobs().payloads()
    checked = rotated = current = unreadable = skipped = batches = 0
    for place in PAYLOAD_PLACES:
        after = None
        while True:
            found = store.sealed(place, after=after, limit=batch)
            if not found:
                break
            batches += 1
            checked += len(found)
            after = (found[-1].row, found[-1].name)
            changes: list[tuple[StoredPayload, JSONValue]] = []
            for payload in found:
                token = payload.value.get(crypt.MARK) if isinstance(payload.value, dict) else None
                if not isinstance(token, str):
                    unreadable += 1
                elif keys.current(token):
                    current += 1
                elif (sealed := keys.rotate(token)) is None:
                    unreadable += 1
                else:
                    changes.append((payload, {crypt.MARK: sealed}))
            if dry_run:
                rotated += len(changes)
            elif changes:
                changed = store.reseal(changes)
                rotated += changed
                skipped += len(changes) - changed
    if not dry_run:  # SPEC AUDIT-01: an action that changes rows is recorded; a look is not
        audit.record(
            "rotate_keys",
            by=by,
            target=f"key {keys.fingerprints[0]}",
            counts=(checked, rotated, skipped + unreadable),
        )
    return KeyRotation(dry_run, checked, rotated, current, unreadable, skipped, batches)
