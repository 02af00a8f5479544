"""The operator's view of events (issue 43): the recent ones with what each publish did, and one
event with its data and the ``on_event`` declarations it could not start."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from uuid import UUID

from .. import crypt, redact
from ..drivers import get_driver
from ..drivers.contract import EventRecord
from ..drivers.reading import read_driver
from ..errors import EventNotFoundError, InvariantError
from ..text import check_name
from .answers import EventRefusal, EventReport, EventSummary


def list_events(
    *,
    name: str | None = None,
    tenant_id: str | None = None,
    since: datetime | None = None,
    limit: int = 50,
) -> list[EventSummary]:
    """The live events (published, not yet expired), newest first, at most ``limit``, each an
    ``EventSummary``: ``id``, ``name``, ``tenant_id``, ``correlation_key``, ``published_at``,
    ``expires_at``, ``age_seconds`` (on the store's clock, as ``published_at`` is) and what its
    publish did, counted in the publisher's transaction: ``released`` (waiting runs woken),
    ``started`` (jobs its ``on_event`` declarations enqueued), ``cancelled`` (live runs its
    ``cancel_on`` declarations cancelled) and ``refused`` (``on_event`` declarations it could
    not start; ``inspect_event`` says which and why) (SPEC EVT-13)::

        >>> [(e.name, e.released, e.refused) for e in list_events(name="order.shipped", limit=2)]
        [('order.shipped', 1, 0), ('order.shipped', 0, 1)]

    ``name``, ``tenant_id`` and ``since`` (an aware datetime: published at or after it) narrow
    the list; without ``tenant_id`` every tenant's events are listed.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvariantError(f"limit={limit!r} must be a positive integer")
    _check_text(name, "name")
    _check_text(tenant_id, "tenant_id")
    if since is not None and (not isinstance(since, datetime) or since.tzinfo is None):
        raise InvariantError(
            f"since={since!r} must be an aware datetime or None",
            hint="use django.utils.timezone.now() - timedelta(...)",
        )
    driver = read_driver()[0]  # SPEC READ-08
    rows = driver.events().recent(name=name, tenant_id=tenant_id, since=since, limit=limit)
    now = driver.steps().now() if rows else None  # the store's clock, as published_at is
    return [_summary(row, now) for row in rows]


def inspect_event(event_id: UUID | str, *, reveal: bool = False) -> EventReport:
    """One live event (an ``EventReport``): ``list_events``' fields, its ``payload`` and its
    ``refusals``, each ``on_event`` declaration it could not start as ``job``, ``code`` and
    ``message`` (SPEC EVT-13)::

        >>> report = inspect_event("0197a3c2-...")
        >>> report.started, [(r.job, r.code) for r in report.refusals]
        (1, [('shop.jobs.welcome', 'X_INPUT_INVALID')])

    Values under ``XJOBS["REDACT_KEYS"]`` in the payload read ``[redacted]`` unless
    ``reveal=True``, as a job's input does. An id no live event has (never published, or
    expired) raises ``EventNotFoundError``.
    """
    wanted = _event_id(event_id)
    driver = read_driver()[0]  # SPEC READ-08
    row = driver.events().get(wanted)
    if row is None and driver is not get_driver():
        driver = get_driver()  # just published: not on the read database yet
        row = driver.events().get(wanted)
    if row is None:
        raise EventNotFoundError(f"no live event has id {wanted}")
    return EventReport(
        **_summary(row, driver.steps().now()).to_json(),
        # opened when sealed, or "encrypted (no key)" (SPEC CRYPT-10)
        payload=crypt.shown(row.payload) if reveal else redact.mask(row.payload),
        refusals=[_refusal(r) for r in row.refused],
    )


def _summary(row: EventRecord, now: datetime | None) -> EventSummary:
    age = 0.0 if now is None else max(0.0, (now - row.published_at).total_seconds())
    return EventSummary(
        id=str(row.id),
        name=row.name,
        tenant_id=row.tenant_id,
        correlation_key=row.correlation_key,
        published_at=row.published_at.isoformat(),
        expires_at=row.expires_at.isoformat(),
        age_seconds=round(age, 3),
        released=row.released,
        started=row.started,
        cancelled=row.cancelled,
        refused=len(row.refused),
    )


def _refusal(entry: Mapping[str, object]) -> EventRefusal:
    return EventRefusal(
        job=str(entry.get("job", "")),
        code=str(entry.get("code", "")),
        message=str(entry.get("message", "")),
    )


def _check_text(value: object, field: str) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value:
        raise InvariantError(
            f"{field}={value!r} must be a non-empty string or None",
            hint=f"leave {field} out (None) to list the events of every {field.split('_')[0]}",
        )
    check_name(value, field)


def _event_id(value: UUID | str) -> UUID:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value).strip())
    except ValueError:
        raise EventNotFoundError(
            f"{value!r} is not an event id",
            hint="an event id is a UUID; python manage.py xjobs events lists them",
        ) from None
