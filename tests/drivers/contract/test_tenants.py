"""The tenant store (issue 46, SPEC ERASE-01/02) on both drivers: a tenant's jobs with every step
of their runs, its events and its outbox rows counted, then erased a batch at a time; another
tenant's rows and untenanted ones stay; a running job is erased only when asked to."""

from __future__ import annotations

from django_xjobs.drivers.contract import Complete, StepRecord, TenantRows
from django_xjobs.ids import uuid7
from tests.drivers.contract.support import claim, request


def _jobs(driver, tenant: str, count: int) -> None:
    for i in range(count):
        driver.jobs().enqueue(request(key=f"{tenant}-{i}", tenant=tenant))


def _events(driver, tenant: str, count: int) -> None:
    for _ in range(count):
        driver.events().publish(
            id=uuid7(), name="order.paid", payload={"o": 1}, correlation_key=None, ttl=3600.0,
            tenant_id=tenant,
        )  # fmt: skip


def test_erase_01_02_a_tenants_rows_go_in_batches_and_running_ones_only_when_asked(harness):
    driver = harness.driver
    _jobs(driver, "acme", 5)  # acme-0 first: the one the claim takes
    _jobs(driver, "other", 2)
    driver.jobs().enqueue(request(key="untenanted"))
    _events(driver, "acme", 3)
    _events(driver, "other", 1)
    driver.outbox("default").stage(request(key="staged", tenant="acme"))
    [run] = claim(driver, limit=1)
    assert run.tenant_id == "acme"
    driver.steps().put(
        StepRecord(run_id=run.run_id, name="a", status="completed", output={"x": 1}),
        job_id=run.id,
        lease_token=run.lease_token,
    )
    store = driver.jobs().tenants()
    assert store.count("acme") == TenantRows(jobs=5, running=1, steps=1, events=3, outbox=1)
    first = store.erase("acme", batch=2, running=False)
    assert (first.jobs, first.running, first.events, first.outbox) == (2, 0, 2, 1)
    while store.erase("acme", batch=2, running=False).total:
        pass
    assert store.count("acme") == TenantRows(jobs=1, running=1, steps=1)  # the running one
    gone = store.erase("acme", batch=10, running=True)
    assert gone == TenantRows(jobs=1, running=1, steps=1)
    assert store.count("acme") == TenantRows()
    assert harness.row(run.id) is None
    # the run's worker writes on: each write is refused by its fence, nothing comes back
    late = StepRecord(run_id=run.run_id, name="b", status="completed", output={"x": 2})
    assert driver.steps().put(late, job_id=run.id, lease_token=run.lease_token) is False
    assert driver.runs().complete([Complete(run.id, run.lease_token, None)]) == set()
    assert store.count("acme") == TenantRows() and harness.row(run.id) is None
    assert store.count("other") == TenantRows(jobs=2, events=1)
    assert len(driver.reads().list_jobs(limit=100)) == 3  # other's two and the untenanted one
