"""A ``@job`` outside any app's ``jobs.py``: never discovered, so never run (issue 23). Only
tests/declarations/test_discovery_rule.py names it, by its row's name; nothing imports it."""

from __future__ import annotations

from django_xjobs import job


@job(idempotency_key="stray:{n}")
def stray(ctx, n: int):
    return n
