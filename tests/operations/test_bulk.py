"""The filter a bulk verb takes (issue 45, SPEC BULK-01): built from a ``JobFilter``, a dict or
keywords, and refused with one coded line before anything is read when it is malformed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from django_xjobs.drivers.contract import FILTER_FIELDS, JobFilter
from django_xjobs.errors import JobFilterError
from django_xjobs.models import StopReason
from django_xjobs.operations import bulk, filters, job_filter


def test_bulk_01_a_filter_is_built_from_keywords_a_dict_or_a_filter_alike():
    when = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)
    by_words = job_filter(
        state="dead",
        queue="emails",
        error_code="X_TERMINAL",
        input='{"order_id": 4711}',
        created_after="2026-12-07T03:00:00+00:00",
    )
    by_dict = job_filter(
        {"state": ["dead"], "queue": "emails", "error_code": "X_TERMINAL", "created_after": when},
        input={"order_id": 4711},
    )
    assert by_words == by_dict == job_filter(by_dict)
    assert by_words.to_json() == {
        "state": ["dead"],
        "queue": "emails",
        "error_code": "X_TERMINAL",
        "created_after": "2026-12-07T03:00:00+00:00",
        "input": {"order_id": 4711},
    }
    assert job_filter() == JobFilter() and JobFilter().to_json() == {}
    assert job_filter(state=["ready", "dead", "ready"]).state == ("ready", "dead")


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"queues": "emails"}, "no field 'queues'"),
        ({"state": "sleeping"}, "not a job state"),
        ({"state": 3}, "a state or a list of states"),
        ({"input": "{not json"}, "input is not JSON"),
        ({"input": "[1, 2]"}, "must be a JSON object"),
        ({"input": {"at": datetime.now(UTC)}}, "not plain JSON"),
        ({"created_after": "2026-12-07T03:00:00"}, "with its timezone"),
        ({"updated_before": "yesterday"}, "with its timezone"),
        ({"queue": ""}, "non-empty string"),
        ({"error_code": "X_TERMINAL: boom"}, "a code alone"),
        ({"stop_reason": "crashed"}, "not a stop reason"),
    ],
)
def test_bulk_01_a_malformed_filter_is_one_coded_line(fields, says):
    with pytest.raises(JobFilterError) as caught:
        job_filter(**fields)
    assert caught.value.code == "X_FILTER_INVALID"
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_bulk_01_an_unknown_field_is_refused_by_every_verb_with_a_guess():
    with pytest.raises(JobFilterError, match="did you mean 'tenant_id'"):
        bulk.retry_jobs(tenant="acme")
    with pytest.raises(JobFilterError, match="a JobFilter or a dict"):
        bulk.cancel_jobs(["dead"])


def test_the_filter_knows_every_stop_reason_and_field():
    assert set(filters.STOP_REASONS) == set(StopReason.values)
    assert set(FILTER_FIELDS) == set(JobFilter.__dataclass_fields__)


def test_bulk_13_a_filter_names_jobs_by_their_ids():
    from uuid import UUID

    a, b = "01a24ee1-6928-7449-bb72-4e1d2b214a37", UUID("01a24ee1-6928-7449-bb72-4e1d2b214a36")
    where = job_filter(ids=[a, b, a])
    assert where.ids == (b, UUID(a))  # checked, once each, in order
    assert where.to_json() == {"ids": [str(b), a]}
    assert job_filter(ids=a).ids == (UUID(a),) and job_filter(ids=[]).ids == ()
    for wrong, says in (
        (["not-an-id"], "not a job id"),
        (3, "a job id or a list of them"),
        ([str(UUID(int=i)) for i in range(filters.MAX_IDS + 1)], "at most 1,000"),
    ):
        with pytest.raises(JobFilterError, match=says) as caught:
            job_filter(ids=wrong)
        assert caught.value.code == "X_FILTER_INVALID"
