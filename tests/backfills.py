"""Module-level backfill fixtures (imported by tests/jobs.py: only jobs.py is discovered)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F

from django_xjobs import backfill

from .models import Order, Token

#: set to n: the n-th page handled from now raises, once (a pass that dies mid-way)
FAIL_ON_CALL: dict[str, int | None] = {"n": None}
#: what that page raises with
FAIL_MESSAGE = {"text": "the pass died on this page"}


@backfill(
    name="tests.fill_currency",
    queryset=lambda: Order.objects.filter(currency__isnull=True),
    batch=3,
    rate=1e6,
)
def fill_currency(ctx, rows):
    if FAIL_ON_CALL["n"] is not None:
        FAIL_ON_CALL["n"] -= 1
        if FAIL_ON_CALL["n"] == 0:
            FAIL_ON_CALL["n"] = None
            raise ConnectionError(FAIL_MESSAGE["text"])
    for order in rows:
        order.currency = "EUR"
        order.handled += 1
    Order.objects.bulk_update(rows, ["currency", "handled"])


@backfill(
    name="tests.forgets_rows",
    queryset=lambda: Order.objects.filter(currency__isnull=True),
    batch=2,
    rate=1e6,
)
def forgets_rows(ctx, rows):
    """Fixes nothing: the pass ends with rows still matching (X_BACKFILL_STALLED)."""


@backfill(
    name="tests.production_only",
    queryset=lambda: Order.objects.filter(currency__isnull=True),
    environments=["production"],
)
def production_only(ctx, rows):
    Order.objects.filter(pk__in=[r.pk for r in rows]).update(currency="EUR")


@backfill(
    name="tests.tokens",
    queryset=lambda: Token.objects.filter(done=False),
    batch=2,
    rate=1e6,
    requires=("tests", "0002_orders"),
)
def finish_tokens(ctx, rows):
    Token.objects.filter(pk__in=[r.pk for r in rows]).update(done=True)


@backfill(
    name="tests.fill_big",
    queryset=lambda: Order.objects.filter(currency__isnull=True),
    batch=200,
    rate=1e6,
)
def fill_big(ctx, rows):
    """The process test's backfill: each row counts the times a handler was given it (one
    UPDATE a page: a bulk_update's CASE per row made the 100-page pass take most of a minute),
    in a transaction as bulk_update's was, so a killed worker's page is rolled back."""
    with transaction.atomic():
        Order.objects.filter(pk__in=[order.pk for order in rows]).update(
            currency="USD", handled=F("handled") + 1
        )
