"""``@job(version=..., old_runs=...)`` (issue 44, SPEC VER-01): what a declaration may say about
the version of its code, refused with one coded line at declaration when it is wrong."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from django_xjobs import job
from django_xjobs.declarations.registry import get_job, unregister
from django_xjobs.errors import JobDefinitionError, JobVersionInvalidError


@pytest.fixture
def names() -> Iterator[list[str]]:
    declared: list[str] = []
    try:
        yield declared
    finally:
        for name in declared:
            unregister(name)


def handler(ctx, n: int = 0):
    return n


def test_ver_01_a_job_is_version_1_and_replays_old_runs_unless_it_says_otherwise(names):
    names.append("test_versions.plain")
    plain = job(name="test_versions.plain", idempotency_key="k:{n}")(handler)
    assert (plain.version, plain.old_runs) == (1, "replay")
    names.append("test_versions.v3")
    later = job(name="test_versions.v3", idempotency_key="k:{n}", version=3, old_runs="park")(
        handler
    )
    assert (later.version, later.old_runs) == (3, "park")
    assert later.describe()["version"] == 3 and later.describe()["old_runs"] == "park"


BAD = {
    "zero": {"version": 0},
    "negative": {"version": -2},
    "a-bool": {"version": True},
    "a-float": {"version": 2.0},
    "a-string": {"version": "2"},
    "too-large": {"version": 2**31},
    "unknown-policy": {"old_runs": "ignore"},
    "policy-case": {"old_runs": "Park"},
    "policy-none": {"old_runs": None},
}


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
def test_ver_01_a_bad_version_or_policy_is_one_coded_line_at_declaration(names, bad):
    name = "test_versions.bad"
    names.append(name)
    with pytest.raises(JobVersionInvalidError) as caught:
        job(name=name, idempotency_key="k:{n}", **bad)(handler)
    error = caught.value
    assert isinstance(error, JobDefinitionError)
    assert error.code == "X_JOB_VERSION_INVALID"
    assert str(error).startswith("X_JOB_VERSION_INVALID: ")
    assert "\n" not in error.message and error.hint
    assert get_job(name) is None  # nothing half-declared
