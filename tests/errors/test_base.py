"""The root of every error: re-raising an error with more context keeps its class, code, hint
and meta (issue 41)."""

from __future__ import annotations

from django_xjobs import XJobsError


def test_prefixed_keeps_the_class_the_code_the_hint_and_the_meta():
    error = XJobsError("declined", code="APP_DECLINED", hint="ask the bank", retry_after=3)
    again = error.prefixed("inputs[2]: ")
    assert type(again) is XJobsError and again is not error
    assert (again.code, again.message, again.hint, again.meta) == (
        "APP_DECLINED",
        "inputs[2]: declined",
        "ask the bank",
        {"retry_after": 3},
    )
    assert str(again) == again.args[0] == "APP_DECLINED: inputs[2]: declined — ask the bank"
    assert error.message == "declined"
