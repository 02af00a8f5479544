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
