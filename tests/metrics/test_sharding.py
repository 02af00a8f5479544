"""The metrics with jobs in several databases (issue 48 item 4): each queue's series under its
alias, an alias that is down as ``xjobs_database_up`` 0 (never its queues at 0), and without the
routing not one series changed. ``shard`` is the suite's second database (tests/settings.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import RequestFactory, override_settings
from prometheus_client.parser import text_string_to_metric_families

from django_xjobs import metrics, views
from django_xjobs.limits.operator import set_queue_limit
from tests import jobs
from tests.support.reads import unreachable

ROUTED = {"QUEUES": ["other", "reports"], "QUEUE_DATABASES": {"reports": "shard"}}

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(autouse=True)
def fresh_reads() -> Iterator[None]:
    metrics.clear_cache()
    yield
    metrics.clear_cache()


def routed(**more: object) -> override_settings:
    return override_settings(XJOBS={**settings.XJOBS, **ROUTED, **more})


def scrape() -> Series:
    text = views.metrics_view(RequestFactory().get("/metrics/")).content.decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def at(series: Series, name: str, **labels: str) -> float | None:
    return series.get((name, frozenset(labels.items())))


@pytest.mark.django_db(databases=["default", "shard"])
def test_shard_20_each_queues_series_carries_its_alias():
    with routed():
        jobs.ok.using(queue="reports").enqueue(n=1)
        jobs.ok.using(queue="reports").enqueue(n=2)
        jobs.ok.enqueue(n=3)
        set_queue_limit("reports", 4)
        series = scrape()
    assert at(series, "xjobs_queue_depth", queue="reports", alias="shard") == 2.0
    assert at(series, "xjobs_queue_depth", queue="default", alias="default") == 1.0
    assert at(series, "xjobs_queue_limit", queue="reports", alias="shard") == 4.0
    assert at(series, "xjobs_database_up", alias="default") == 1.0
    assert at(series, "xjobs_database_up", alias="shard") == 1.0
    # every per-queue series the scrape reads from the databases (the xjobs_queue_* gauges) is
    # labelled; a counter this process keeps (an earlier test's runs on "reports") is not read
    queue_series = [
        key
        for key in series
        if key[0].startswith("xjobs_queue_") and ("queue", "reports") in key[1]
    ]
    assert queue_series and all(("alias", "shard") in labels for _, labels in queue_series)


@pytest.mark.django_db
def test_shard_20_without_routing_the_exposition_is_unchanged():
    jobs.ok.enqueue(n=3)
    series = scrape()
    assert at(series, "xjobs_queue_depth", queue="default") == 1.0
    assert not any(name == "xjobs_database_up" for name, _ in series)
    assert not any(label == "alias" for _, labels in series for label, _ in labels)


@pytest.mark.django_db(databases=["default", "shard"], transaction=True)
def test_shard_21_an_alias_that_is_down_is_up_0_never_its_queues_at_0():
    with routed():
        jobs.ok.enqueue(n=3)
        jobs.ok.using(queue="reports").enqueue(n=1)
        with unreachable("shard") as gone:
            series = scrape()
    assert at(series, "xjobs_database_up", alias=gone) == 0.0
    assert at(series, "xjobs_database_up", alias="default") == 1.0
    assert at(series, "xjobs_queue_depth", queue="default", alias="default") == 1.0
    # the down alias's queues have no samples at all: not one reads 0
    assert not any(
        ("alias", gone) in labels for name, labels in series if name != "xjobs_database_up"
    )


# --- SHARD-55: the limit keys' and open batches' series carry their alias ----------------------

PER_ACCOUNT = "tests.jobs.per_account"


def _limited_run() -> None:
    """A run of a limited job claimed as a worker claims it: its key's row counts it."""
    from django_xjobs.drivers import get_driver
    from django_xjobs.limits.claims import ClaimLimits
    from django_xjobs.limits.worker import declared_limits

    jobs.per_account.enqueue(account="acme")
    get_driver().runs().claim(
        queues=["limited"],
        limit=5,
        visibility_timeout=30,
        worker_id="w",
        limits=ClaimLimits(jobs=declared_limits()[0]),
    )


def _limited_and_batched() -> None:
    """A limit key running in ``shard`` (the ``limited`` queue is routed there), one paused in
    ``default`` (a RateLimited pause where a run of it was), an open batch in each."""
    from django_xjobs import Batch
    from django_xjobs.drivers import get_driver
    from django_xjobs.limits.keys import SEPARATOR

    _limited_run()
    get_driver().place.drivers["default"].limits().pause_key(PER_ACCOUNT + SEPARATOR + "b", 3600)
    Batch().add(jobs.ok.using(queue="reports"), n=1)
    Batch().add(jobs.ok, n=2)


ROUTED_LIMITS = {
    "QUEUES": ["other", "reports", "limited"],
    "QUEUE_DATABASES": {"reports": "shard", "limited": "shard"},
}


@pytest.mark.django_db(databases=["default", "shard"], transaction=True)
def test_shard_55_limit_keys_and_open_batches_are_per_alias_not_summed():
    with override_settings(XJOBS={**settings.XJOBS, **ROUTED_LIMITS}):
        _limited_and_batched()
        series = scrape()
        metrics.clear_cache()
        with unreachable("shard") as gone:
            down = scrape()
    for alias, running, paused in (("shard", 1.0, 0.0), ("default", 0.0, 1.0)):
        assert at(series, "xjobs_limit_keys", job=PER_ACCOUNT, alias=alias) == 1.0
        assert at(series, "xjobs_limit_keys_paused", job=PER_ACCOUNT, alias=alias) == paused
        assert at(series, "xjobs_limit_running", job=PER_ACCOUNT, alias=alias) == running
        assert at(series, "xjobs_batches_open", alias=alias) == 1.0
    assert at(series, "xjobs_limit_keys", job=PER_ACCOUNT) is None  # never a sum without alias
    assert at(series, "xjobs_batches_open") is None
    # while shard is down its series are left out and xjobs_database_up says so; the others stay
    assert at(down, "xjobs_database_up", alias=gone) == 0.0
    assert at(down, "xjobs_limit_keys", job=PER_ACCOUNT, alias="default") == 1.0
    assert at(down, "xjobs_batches_open", alias="default") == 1.0
    assert not any(
        ("alias", gone) in labels for name, labels in down if name != "xjobs_database_up"
    )


@pytest.mark.django_db(databases=["default", "shard"], transaction=True)
def test_shard_55_on_one_database_the_limit_and_batch_series_have_no_alias():
    from django_xjobs import Batch

    _limited_run()
    Batch().add(jobs.ok, n=2)
    series = scrape()
    assert at(series, "xjobs_limit_keys", job=PER_ACCOUNT) == 1.0
    assert at(series, "xjobs_limit_running", job=PER_ACCOUNT) == 1.0
    assert at(series, "xjobs_batches_open") == 1.0
    assert not any(label == "alias" for _, labels in series for label, _ in labels)
