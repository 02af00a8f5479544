"""A declaration's error for a rule that has a class elsewhere is both classes, with the rule's
code (issue 41), and pickles by reference to ``django_xjobs.errors``."""

from __future__ import annotations

import pickle

import pytest

from django_xjobs import (
    DurationInvalidError,
    InvariantDefinitionError,
    InvariantError,
    JobDefinitionError,
    errors,
    job,
)
from django_xjobs.declarations.registry import unregister


def test_a_declaration_error_for_a_rule_is_both_classes_with_the_rules_code():
    made = JobDefinitionError.of(DurationInvalidError)
    assert made.__name__ == "DurationInvalidDefinitionError"
    assert issubclass(made, JobDefinitionError) and issubclass(made, DurationInvalidError)
    assert made.code == "X_DURATION_INVALID"
    assert JobDefinitionError.of(DurationInvalidError) is made  # one class per rule
    assert JobDefinitionError.of(InvariantError) is InvariantDefinitionError
    assert JobDefinitionError.of(errors.CronInvalidError) is errors.CronInvalidError


def test_a_bad_duration_in_a_declaration_is_caught_by_either_class():
    def handler(ctx, order_id): ...

    with pytest.raises(DurationInvalidError) as caught:
        job(name="errors.bad_duration", idempotency_key="k:{order_id}", timeout="soon")(handler)
    unregister("errors.bad_duration")
    assert isinstance(caught.value, JobDefinitionError)
    assert caught.value.code == "X_DURATION_INVALID"
    assert str(caught.value).startswith("X_DURATION_INVALID: job 'errors.bad_duration': ")


def test_a_declaration_error_pickles_by_reference_even_where_its_class_is_not_made_yet():
    made = JobDefinitionError.of(DurationInvalidError)
    data = pickle.dumps(made("timeout='soon' is not a duration", hint="write 30s"))
    assert errors.DurationInvalidDefinitionError is made  # errors answers the name
    del JobDefinitionError._of[DurationInvalidError]  # as in a process that has not made it
    try:
        loaded = pickle.loads(data)
        assert type(loaded) is not made and type(loaded).__name__ == made.__name__
        assert isinstance(loaded, JobDefinitionError) and isinstance(loaded, DurationInvalidError)
        assert (loaded.code, loaded.message, loaded.hint) == (
            "X_DURATION_INVALID",
            "timeout='soon' is not a duration",
            "write 30s",
        )
    finally:
        JobDefinitionError._of[DurationInvalidError] = made
    with pytest.raises(AttributeError):
        errors.NoSuchRuleDefinitionError  # noqa: B018
