"""``erase_tenant`` / ``xjobs erase-tenant`` (issue 46, SPEC ERASE-01..03): a tenant's jobs, steps,
events and outbox rows erased in batches and audited; refused while its jobs run unless forced;
counted by a dry run; asked for first on the command line. The admin shows the audit row."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from django_xjobs import publish_event
from django_xjobs.errors import ConfirmationRequiredError, InvariantError, TenantRunningError
from django_xjobs.management.data_text import erase_tenant_action
from django_xjobs.operations import erase_tenant, inspect_audit
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.drivers.contract.support import claim


def _tenant(tenant: str, count: int) -> None:
    for n in range(count):
        jobs.ok.using(tenant_id=tenant).enqueue(n=n)
    publish_event("order.paid", {"order": 1}, tenant_id=tenant)


def test_erase_01_erase_tenant_deletes_every_row_of_the_tenant_and_is_audited(harness):
    _tenant("acme", 3)
    _tenant("other", 1)
    run_until_idle()  # done jobs are erased as ready ones are
    jobs.ok.using(tenant_id="acme").enqueue(n=99)
    looked = erase_tenant("acme", dry_run=True)
    assert (looked.jobs, looked.events, looked.dry_run) == (4, 1, True)
    assert inspect_audit(verb="erase_tenant") == []
    done = erase_tenant("acme", by="ops:test", batch=2)
    assert (done.jobs, done.events, done.batches) == (4, 1, 2)
    assert erase_tenant("acme", dry_run=True).jobs == 0
    assert erase_tenant("other", dry_run=True).jobs == 1
    [entry] = inspect_audit(verb="erase_tenant")
    assert (entry["actor"], entry["target"], entry["changed"]) == ("ops:test", "acme", 5)


def test_erase_02_running_jobs_are_refused_unless_forced(harness):
    _tenant("acme", 2)
    [run] = claim(harness.driver, limit=1)
    with pytest.raises(TenantRunningError) as error:
        erase_tenant("acme")
    assert error.value.code == "X_TENANT_RUNNING"
    assert erase_tenant("acme", dry_run=True).jobs == 2  # nothing was erased
    done = erase_tenant("acme", force=True)
    assert (done.jobs, done.running) == (2, 1)
    assert harness.row(run.id) is None


def test_erase_02_bad_arguments_are_refused(db):
    for bad in ("", None):
        with pytest.raises(InvariantError):
            erase_tenant(bad)
    with pytest.raises(InvariantError, match="batch=0"):
        erase_tenant("acme", batch=0)


def test_erase_03_the_command_asks_first_and_refuses_without_a_terminal(db):
    jobs.ok.using(tenant_id="acme").enqueue(n=1)
    options = {"tenant": "acme", "dry_run": False, "yes": False, "force": False, "batch": 1000}
    with pytest.raises(ConfirmationRequiredError):
        erase_tenant_action(options, interactive=lambda: False)
    _, text = erase_tenant_action(options, interactive=lambda: True, ask=lambda q: "n")
    assert text == "nothing erased" and erase_tenant("acme", dry_run=True).jobs == 1
    out = StringIO()
    call_command("xjobs", "erase-tenant", "acme", "--dry-run", "--json", stdout=out)
    assert json.loads(out.getvalue())["jobs"] == 1
    out = StringIO()
    call_command("xjobs", "erase-tenant", "acme", "--yes", stdout=out)
    assert "tenant 'acme' erased 1 job(s)" in out.getvalue()
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    page = client.get("/admin/django_xjobs/operatoraction/?verb=erase_tenant")
    assert page.status_code == 200 and "erase_tenant" in page.content.decode()


def test_erase_06_the_command_counts_the_history_and_the_fair_share_key(db):
    """A tenant whose only rows are moved jobs and its fair-share key is asked about and erased,
    and the dry run and the answer name the key."""
    from django_xjobs.drivers import get_driver
    from django_xjobs.limits.keys import tenant_key

    jobs.ok.using(tenant_id="acme").enqueue(n=1)
    run_until_idle()
    driver = get_driver()
    driver.jobs().age(120, only={"jobs"})
    assert driver.history().move_finished(grace=60) == 1
    driver.limits().pause_key(tenant_key("acme"), 60)
    options = {"tenant": "acme", "dry_run": False, "yes": False, "force": False, "batch": 1000}
    with pytest.raises(ConfirmationRequiredError, match=r"1 job.*1 limit key"):
        erase_tenant_action(options, interactive=lambda: False)
    out = StringIO()
    call_command("xjobs", "erase-tenant", "acme", "--dry-run", "--json", stdout=out)
    assert {k: json.loads(out.getvalue())[k] for k in ("jobs", "limit_keys")} == {
        "jobs": 1,
        "limit_keys": 1,
    }
    out = StringIO()
    call_command("xjobs", "erase-tenant", "acme", "--yes", stdout=out)
    assert "erased 1 job(s)" in out.getvalue() and "1 limit key(s)" in out.getvalue()
    left = erase_tenant("acme", dry_run=True)
    assert (left.jobs, left.limit_keys) == (0, 0)
