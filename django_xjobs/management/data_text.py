"""``xjobs rotate-keys``: what it re-encrypted (and sealed, with ``--encrypt-clear``), in two
lines; ``xjobs erase-tenant``: the erasure asked for first (it cannot be undone), then done and
told in a line (issue 46)."""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from collections.abc import Callable, Mapping

from ..errors import ConfirmationRequiredError
from ..operations.encryption import DEFAULT_BATCH, rotate_keys
from ..operations.tenants import TenantErasure, erase_tenant
from .bulk_text import operator


def add_arguments(action: Callable[[str, str], ArgumentParser]) -> None:
    """``xjobs rotate-keys`` and ``xjobs erase-tenant``: their arguments, each verb made by
    ``action`` (which adds ``--json`` and the global options)."""
    rotate = action(
        "rotate-keys",
        "re-encrypt payloads sealed with an older key under the first of ENCRYPTION_KEYS",
    )
    rotate.add_argument("--batch", type=int, default=500, help="payloads per statement")
    rotate.add_argument(
        "--dry-run", action="store_true", help="count what would be rotated; change nothing"
    )
    rotate.add_argument(
        "--encrypt-clear",
        action="store_true",
        help="also encrypt payloads written in clear before the keys were set",
    )
    erase = action("erase-tenant", "delete every job, step, event and outbox row of a tenant")
    erase.add_argument("tenant")
    erase.add_argument("--batch", type=int, default=1000, help="rows per statement")
    erase.add_argument("--dry-run", action="store_true", help="count; delete nothing")
    erase.add_argument("--yes", action="store_true", help="do not ask first")
    erase.add_argument("--force", action="store_true", help="erase running jobs too")


def rotate_keys_action(options: Mapping[str, object], by: str | None) -> tuple[object, str]:
    """Rotate (and with ``--encrypt-clear`` seal the clear rows); the answer and its text."""
    batch = options["batch"]
    done = rotate_keys(
        batch=batch if isinstance(batch, int) else DEFAULT_BATCH,
        by=by,
        dry_run=bool(options["dry_run"]),
        encrypt_clear=bool(options.get("encrypt_clear")),
    )
    would = done.dry_run
    text = (
        f"{'would re-encrypt' if would else 're-encrypted'} {done.rotated} of {done.checked} "
        f"encrypted payload(s) under the first key; {done.current} already under it, "
        f"{done.unreadable} no key opens, {done.skipped} changed meanwhile"
    )
    if done.encrypt_clear:
        text += (
            f"\n{'would encrypt' if would else 'encrypted'} {done.encrypted} payload(s) written "
            f"in clear; {done.left_clear} kept clear (encrypt=False, a task's, or undeclared)"
        )
    if not would and not done.unreadable and not done.skipped:
        text += "\nno payload needs an older key: it can leave XJOBS['ENCRYPTION_KEYS']"
    return done.to_json(), text


def erase_tenant_action(
    options: Mapping[str, object],
    *,
    ask: Callable[[str], str] = input,
    interactive: Callable[[], bool] = lambda: sys.stdin.isatty(),
) -> tuple[object, str]:
    """Count the tenant's rows; unless ``--dry-run`` or ``--yes``, ask on a terminal (and refuse
    without one: ``X_CONFIRMATION_REQUIRED``, nothing erased); then erase them (SPEC ERASE-03)."""
    tenant = str(options["tenant"])
    batch = options.get("batch")
    size = batch if isinstance(batch, int) else 1000
    force = bool(options.get("force"))
    held = erase_tenant(tenant, dry_run=True, batch=size)
    if options.get("dry_run"):
        return held, _text(held)
    if not options.get("yes") and (held.jobs or held.events or held.outbox or held.limit_keys):
        if not interactive():
            raise ConfirmationRequiredError(
                f"xjobs erase-tenant would delete {_rows(held)} of tenant {tenant!r} and there is "
                "no terminal to ask on: nothing was erased",
                hint="look first with --dry-run, then add --yes",
            )
        question = f"erase {_rows(held)} of tenant {tenant!r}? This cannot be undone. [y/N] "
        if ask(question).strip().lower() not in ("y", "yes"):
            return {"tenant_id": tenant, "confirmed": False}, "nothing erased"
    done = erase_tenant(tenant, by=operator(), force=force, batch=size)
    return done, _text(done)


def _rows(rows: TenantErasure) -> str:
    return (
        f"{rows.jobs} job(s) ({rows.running} running), {rows.steps} step(s), "
        f"{rows.events} event(s), {rows.outbox} outbox row(s) and {rows.limit_keys} "
        "limit key(s)"
    )


def _text(rows: TenantErasure) -> str:
    verb = "holds" if rows.dry_run else "erased"
    return f"tenant {rows.tenant_id!r} {verb} {_rows(rows)}"
