"""``rotate_keys`` / ``xjobs rotate-keys`` (issue 46, SPEC CRYPT-07, CRYPT-12..14): every payload
sealed with an older key (a job's input, result and step outputs, a staged outbox copy, an
event's data) is re-encrypted under the first, a batch at a time, audited; payloads already
under it are left, and ones no key opens are counted, never dropped. ``--encrypt-clear`` seals
what was written before the keys were set, but a job declared ``encrypt=False``. Both
drivers."""

from __future__ import annotations

import json
import uuid
from io import StringIO

import pytest
from django.core.management import call_command

from django_xjobs import crypt, publish_event
from django_xjobs.drivers.contract import PAYLOAD_PLACES
from django_xjobs.errors import ConfigInvalidError
from django_xjobs.operations import inspect_audit, inspect_event, inspect_job, rotate_keys
from django_xjobs.testing import run_until_idle
from tests import jobs
from tests.test_crypt import BASE, EMAIL, NEW, OLD, keys

OTHER = "wJ8o0ZlGq5rR2kQ0m9i6U1rK3bq3b8mX1cQJm0qYk3E="


def _payloads(harness) -> list:
    store = harness.driver.jobs().payloads()
    return [
        p
        for place in ("job_input", "job_result", "step_output")
        for p in store.sealed(place, after=None, limit=100)
    ]


def test_crypt_07_rotation_re_encrypts_under_the_first_key_so_the_old_one_can_go(harness):
    with keys(OLD):
        done_id = jobs.sealed.enqueue(token=f"t-{uuid.uuid4()}", email=EMAIL).id
        run_until_idle()
        harness.advance(1)
        run_until_idle()
        waiting_id = jobs.sealed.enqueue(token=f"t-{uuid.uuid4()}", email=EMAIL).id
    with keys(NEW, OLD):
        before = len(_payloads(harness))
        looked = rotate_keys(batch=2, dry_run=True, by="ops:test")
        assert (looked.checked, looked.rotated, looked.current) == (before, before, 0)
        assert inspect_audit(verb="rotate_keys") == []  # a dry run records nothing
        done = rotate_keys(batch=2, by="ops:test")
        assert (done.checked, done.rotated, done.unreadable, done.skipped) == (before, before, 0, 0)
        assert done.batches >= 3  # two inputs, a result and two step outputs, two at a time
        again = rotate_keys(batch=2, by="ops:test")
        assert (again.rotated, again.current) == (0, before)
        [entry, _] = inspect_audit(verb="rotate_keys")
        assert entry["actor"] == "ops:test" and entry["matched"] == before
    with keys(NEW):  # the old key is gone: everything still opens, and the waiting run runs
        assert crypt.unseal(harness.row(done_id).result)["sent_to"] == EMAIL
        run_until_idle()
        harness.advance(1)
        run_until_idle()
        assert harness.row(waiting_id).state == "done"


def test_crypt_07_a_payload_no_key_opens_is_counted_and_left(harness):
    with keys(OTHER):
        job_id = jobs.sealed.enqueue(token=f"t-{uuid.uuid4()}", email=EMAIL).id
    stored = harness.row(job_id).input
    with keys(NEW, OLD):
        done = rotate_keys()
    assert (done.checked, done.rotated, done.unreadable) == (1, 0, 1)
    assert harness.row(job_id).input == stored


def test_crypt_07_rotate_keys_refuses_without_keys_and_bad_batches(db):
    from django.test import override_settings

    with override_settings(XJOBS=BASE), pytest.raises(ConfigInvalidError, match="needs XJOBS"):
        rotate_keys()
    with keys(NEW), pytest.raises(Exception, match="batch=0"):
        rotate_keys(batch=0)


def test_crypt_07_the_command_reports_what_it_did(db):
    with keys(OLD):
        jobs.sealed.enqueue(token=f"t-{uuid.uuid4()}", email=EMAIL)
    out = StringIO()
    with keys(NEW, OLD):
        call_command("xjobs", "rotate-keys", "--json", stdout=out)
        assert json.loads(out.getvalue())["rotated"] == 1
        out = StringIO()
        call_command("xjobs", "rotate-keys", stdout=out)
    assert "re-encrypted 0 of 1" in out.getvalue() and "can leave" in out.getvalue()


# --- the outbox, events, and rows written in clear (SPEC CRYPT-12..14) ----------------------------


def _stage(harness, **inputs):
    """A staged outbox row of ``jobs.sealed`` (its input sealed under the keys set now)."""
    request = jobs.sealed.build_request({"token": f"t-{uuid.uuid4()}", "email": EMAIL, **inputs})
    return harness.driver.outbox("default").stage(request)


def _unsealed(harness) -> list:
    store = harness.driver.jobs().payloads()
    return [p for place in PAYLOAD_PLACES for p in store.unsealed(place, after=None, limit=100)]


def test_crypt_12_rotation_re_encrypts_the_outbox_copies_and_event_data(harness):
    with keys(OLD):
        staged = _stage(harness)
        event = publish_event("profile.seen", {"user_id": 7, "email": EMAIL}).id
    with keys(NEW, OLD):
        done = rotate_keys(batch=1, by="ops:test")
        assert (done.checked, done.rotated, done.skipped, done.unreadable) == (2, 2, 0, 0)
        assert rotate_keys().current == 2
    with keys(NEW):  # the old key is gone: both still open
        store = harness.driver.jobs().payloads()
        [copy] = store.sealed("outbox_input", after=None, limit=10)
        assert copy.row == staged and crypt.unseal(copy.value)["email"] == EMAIL
        assert inspect_event(event, reveal=True).payload == {"user_id": 7, "email": EMAIL}


def test_crypt_13_encrypt_clear_seals_what_was_written_before_the_keys(harness):
    finished = jobs.sealed.enqueue(token=f"t-{uuid.uuid4()}", email=EMAIL).id
    run_until_idle()
    harness.advance(1)
    run_until_idle()
    parked = jobs.waiter.enqueue(order_id=7).id
    run_until_idle()
    kept = jobs.clear_input.enqueue(token="in-clear").id
    _stage(harness)
    publish_event("profile.seen", {"user_id": 7, "email": EMAIL})
    before = _unsealed(harness)
    sealable = [p for p in before if p.job != jobs.clear_input.name]
    assert EMAIL in str(before) and len(sealable) >= 5  # input, result, step, outbox, event
    with keys(NEW):
        looked = rotate_keys(encrypt_clear=True, dry_run=True)
        assert (looked.encrypted, looked.left_clear) == (len(sealable), 1)
        assert _unsealed(harness) == before and inspect_audit(verb="rotate_keys") == []
        done = rotate_keys(encrypt_clear=True, batch=2, by="ops:test")
        assert (done.encrypted, done.left_clear, done.skipped) == (len(sealable), 1, 0)
        left = _unsealed(harness)
        assert [p.job for p in left if p.place != "step_output"] == [jobs.clear_input.name]
        assert EMAIL not in str(left)  # a waiting step's record stays as it is: no payload
        assert harness.row(kept).input == {"token": "in-clear"}  # encrypt=False: kept clear
        assert crypt.is_sealed(harness.row(finished).result)
        assert inspect_job(finished, reveal=True)["input"]["email"] == EMAIL
        assert rotate_keys(encrypt_clear=True).encrypted == 0
        [_, entry] = inspect_audit(verb="rotate_keys")  # newest first
        assert entry["actor"] == "ops:test" and "clear rows too" in entry["target"]
        # the parked run, its waiting record untouched, still receives its event and runs
        publish_event("order.shipped", {"order_id": 7})
        run_until_idle()
        assert crypt.unseal(harness.row(parked).result) == {"got": {"order_id": 7}}


def test_crypt_14_the_command_encrypts_clear_rows_with_dry_run_and_json(db):
    jobs.sealed.enqueue(token=f"t-{uuid.uuid4()}", email=EMAIL)
    jobs.clear_input.enqueue(token="in-clear")
    with keys(NEW):
        out = StringIO()
        call_command("xjobs", "rotate-keys", "--encrypt-clear", "--dry-run", "--json", stdout=out)
        looked = json.loads(out.getvalue())
        assert (looked["encrypted"], looked["left_clear"], looked["dry_run"]) == (1, 1, True)
        out = StringIO()
        call_command("xjobs", "rotate-keys", "--encrypt-clear", stdout=out)
        text = out.getvalue()
    assert "encrypted 1 payload(s) written in clear; 1 kept clear" in text
    assert "would" not in text


def test_crypt_12_rotation_and_encrypt_clear_take_the_history_too(harness):
    with keys(OLD):
        sealed = jobs.sealed.enqueue(token=f"t-{uuid.uuid4()}", email=EMAIL).id
        run_until_idle()
        harness.advance(1)
        run_until_idle()
    clear = jobs.clear_input.enqueue(token="in-clear").id
    written_clear = jobs.sealed.enqueue(token=f"t-{uuid.uuid4()}", email=EMAIL).id
    run_until_idle()
    harness.advance(1)
    run_until_idle()
    harness.advance(7200)
    assert harness.driver.history().move_finished(grace=3600) == 3
    store = harness.driver.jobs().payloads()
    assert {p.row for p in store.sealed("history_input", after=None, limit=10)} == {sealed}
    with keys(NEW, OLD):
        done = rotate_keys(encrypt_clear=True)
        assert done.skipped == done.unreadable == 0
        assert done.left_clear == 2  # clear_input's input and result, kept clear
        assert done.rotated >= 2 and done.encrypted >= 3  # the inputs, results, step outputs
    with keys(NEW):  # the old key is gone: the moved jobs still open
        history = {p.row: p for p in store.sealed("history_input", after=None, limit=10)}
        assert set(history) == {sealed, written_clear}
        assert all(crypt.unseal(p.value)["email"] == EMAIL for p in history.values())
        results = store.sealed("history_result", after=None, limit=10)
        assert {p.row for p in results} == {sealed, written_clear}
        assert all(crypt.unseal(p.value)["sent_to"] == EMAIL for p in results)
        assert [p.row for p in store.unsealed("history_input", after=None, limit=10)] == [clear]
