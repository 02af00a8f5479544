"""``TenantStore`` on ``tenants.sql``: a tenant's rows counted, then erased a batch per
statement (issue 46)."""

from __future__ import annotations

from pathlib import Path

from django.db import transaction

from ...limits.keys import tenant_key
from ..contract import TenantRows
from . import sql

STATEMENTS = sql.load(Path(__file__).with_name("tenants.sql"))


class PostgresTenantStore:
    def __init__(self, using: str) -> None:
        self.using = using

    def count(self, tenant_id: str) -> TenantRows:
        params = {"tenant": tenant_id, "fair_key": tenant_key(tenant_id)}
        row = sql.fetch(self.using, STATEMENTS["tenant_count"], params)[0]
        return TenantRows(*(int(n) for n in row))

    def erase(self, tenant_id: str, *, batch: int, running: bool) -> TenantRows:
        params = {
            "tenant": tenant_id,
            "batch": batch,
            "running": running,
            "fair_key": tenant_key(tenant_id),
        }
        with transaction.atomic(using=self.using):
            row = sql.fetch(self.using, STATEMENTS["tenant_erase"], params)[0]
        return TenantRows(*(int(n) for n in row))
