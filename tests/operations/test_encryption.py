"""``rotate_keys`` / ``xjobs rotate-keys`` (issue 46, SPEC CRYPT-07): every payload sealed with an
older key is re-encrypted under the first, a batch at a time, audited; payloads already under it
are left, and ones no key opens are counted, never dropped. Both drivers."""

from __future__ import annotations

import json
import uuid
from io import StringIO

import pytest
from django.core.management import call_command

from django_xjobs import crypt
from django_xjobs.errors import ConfigInvalidError
from django_xjobs.operations import inspect_audit, rotate_keys
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
