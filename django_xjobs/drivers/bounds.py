"""The byte limits on what a job's live-key index holds: its name, tenant and idempotency key.

PostgreSQL refuses an index entry over about a third of a page (2,704 bytes on a btree, after
compression), and the live-key unique index (``x_jobs_name_tenant_idempotency_live_idx``) holds
all three values of a job. A value over that was once taken at enqueue, staged inside
``atomic()``, and then failed every publish (SQLSTATE 54000): so every path that builds a job's
row checks these limits first, staged or not, on both drivers alike. Together they stay well
under the index's limit, whatever the text: 800 + 512 + 1,024 bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..errors import DependencyCycleError, InputInvalidError
from ..limits.keys import key_of

if TYPE_CHECKING:
    from .contract import EnqueueRequest

#: bytes of UTF-8 an idempotency key may hold (a longer one: hash it)
MAX_KEY_BYTES: Final = 1024
#: bytes of UTF-8 a tenant id may hold
MAX_TENANT_BYTES: Final = 512
#: bytes of UTF-8 a job's name may hold (``@job(name=...)`` allows 200 characters: 800 bytes)
MAX_NAME_BYTES: Final = 800
#: jobs one job may wait for (``using(after=...)``): its row holds them in an array, and each of
#: them holds it among its dependants
MAX_AFTER: Final = 1000
#: what a btree index entry may hold (PostgreSQL's limit, for an 8 KiB page)
INDEX_ENTRY_BYTES: Final = 2704


def size(text: str) -> int:
    """Bytes of ``text`` as stored (UTF-8); a lone surrogate counts as the 3 bytes it would
    take, so measuring never raises."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def check_request(request: EnqueueRequest, *, what: str | None = None) -> None:
    """Refuse ``request`` when its key, tenant or name is over its byte limit, naming the value,
    the limit and its actual size (``X_INPUT_INVALID``). ``what`` names the caller's job.

    Every value the publish derives from the request is decided here too, so a staged row
    carries nothing its publish would refuse (issue 40): the limit key is rendered and measured
    (``limits.keys.render``), and the jobs it waits for are counted and may not include itself."""
    where = what or f"job {request.name[:80]!r}"
    check_derived(request, what=where)
    for field, value, limit, hint in (
        (
            "idempotency key",
            request.idempotency_key,
            MAX_KEY_BYTES,
            "hash a long key, e.g. hashlib.sha256(text.encode()).hexdigest()",
        ),
        ("tenant_id", request.tenant_id, MAX_TENANT_BYTES, "use a short tenant id"),
        ("job name", request.name, MAX_NAME_BYTES, "give the job a shorter name"),
    ):
        if value is None or len(value) * 4 <= limit:  # at most 4 bytes a character: fits
            continue
        actual = size(value)
        if actual > limit:
            raise InputInvalidError(
                f"{where}: the {field} is {actual:,} bytes; at most {limit:,} bytes are accepted "
                f"(it starts {value[:40]!r})",
                hint=hint,
                field=field,
                limit=limit,
                size=actual,
            )


def check_derived(request: EnqueueRequest, *, what: str | None = None) -> None:
    """Refuse ``request`` when a value its publish derives cannot be made from it: its limit key
    (rendered from the inputs, within ``limits.keys.MAX_RENDERED_BYTES``) or the jobs it waits
    for. The enqueue asks first; the publish asks again of every staged row (issue 40)."""
    key_of(request.name, request.input, request.tenant_id)
    if request.after is not None:
        check_after(request, what or f"job {request.name[:80]!r}")


def check_after(request: EnqueueRequest, where: str) -> None:
    """Refuse ``request`` when it waits for more than ``MAX_AFTER`` jobs, or for itself (a
    request that carries its id before it is staged)."""
    if len(request.after or ()) > MAX_AFTER:
        raise InputInvalidError(
            f"{where}: after names {len(request.after or ()):,} jobs; at most {MAX_AFTER:,} "
            "are accepted",
            hint="wait for a Batch of them instead (Batch(on_success=...))",
            field="after",
            limit=MAX_AFTER,
            size=len(request.after or ()),
        )
    if request.id is not None and request.id in (request.after or ()):
        raise DependencyCycleError(f"{where}: job {request.id} was given itself to wait for")


class IndexEntryTooLarge(Exception):
    """What the memory driver raises for a row PostgreSQL's live-key index could not hold, with
    the SQLSTATE PostgreSQL gives it (54000, program limit exceeded): a row written past the
    enqueue checks (by another version, or by SQL) fails its publish the same way on both
    drivers. Memory measures the values as they are; PostgreSQL compresses an index entry
    first, so it takes some long repetitive keys memory refuses."""

    sqlstate = "54000"


def check_index_entry(name: str, tenant_id: str | None, key: str) -> None:
    """Raise ``IndexEntryTooLarge`` when the live-key index entry of these values is too big."""
    total = size(name) + size(tenant_id or "") + size(key)
    if total > INDEX_ENTRY_BYTES:
        raise IndexEntryTooLarge(
            f"index row size {total} exceeds btree version 4 maximum {INDEX_ENTRY_BYTES} for "
            'index "x_jobs_name_tenant_idempotency_live_idx"'
        )
