"""Payloads encrypted at rest (issue 46 item 3): ``XJOBS["ENCRYPTION_KEYS"]`` seals a job's input
(its outbox copy with it), its result and its steps' outputs as ``{"xjobs:fernet": token}``; the
first key encrypts and every key decrypts, so a row sealed before a rotation still runs; a row
written before keys were set still reads; a worker without the key parks the run unrun with
``X_ENCRYPTION_KEY_MISSING`` and gives its attempt back; readers show ``encrypted (no key)``.
Storage cases run on both drivers (``harness``)."""

from __future__ import annotations

import uuid

import pytest
from django.core import checks
from django.db import transaction
from django.test import override_settings

from django_xjobs import crypt, metrics
from django_xjobs.conf import validate
from django_xjobs.errors import (
    ConfigInvalidError,
    EncryptionKeyMissingError,
    InputEncryptedError,
    InputInvalidError,
    JobFilterError,
    ResultInvalidError,
    StepOutputInvalidError,
)
from django_xjobs.models import OutboxEntry
from django_xjobs.operations import inspect_job
from django_xjobs.operations.filters import job_filter
from django_xjobs.outbox.relay import Relay
from django_xjobs.run.execute import _result_json
from django_xjobs.run.execution import Outcome
from django_xjobs.steps.events import publish_event
from django_xjobs.steps.output import check_output
from django_xjobs.testing import run_until_idle
from tests import jobs

OLD = "8swvFQ1LJdqbjpcP9X82hDtwTlVifl7Ogmk22ahOwiM="
NEW = "IyAVGb74KSM4V7OAxMkA2luUHarE32uaq6xCUOU2ovc="
BASE = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "off"}
EMAIL = "ada@example.com"


def keys(*given: str, **more: object):
    return override_settings(XJOBS={**BASE, "ENCRYPTION_KEYS": list(given), **more})


def token() -> str:
    return f"t-{uuid.uuid4()}"


def run_to_the_end(harness) -> list:
    """Every execution until the job settles: the first attempt fails at ``send``, the second
    replays ``lookup`` from storage (the retry is moved due, not waited for)."""
    done = run_until_idle()
    harness.advance(1)
    return done + run_until_idle()


# --- the settings ---------------------------------------------------------------------------------


def test_crypt_01_keys_are_read_once_and_a_bad_one_is_refused_without_echoing_it():
    assert validate(BASE).encryption is None
    assert validate({**BASE, "ENCRYPTION_KEYS": []}).encryption is None
    ring = validate({**BASE, "ENCRYPTION_KEYS": [NEW, OLD]}).encryption
    assert ring is not None and len(ring.fingerprints) == 2
    with pytest.raises(
        ConfigInvalidError, match=r"ENCRYPTION_KEYS\"\]\[1\] is not a Fernet key"
    ) as error:
        validate({**BASE, "ENCRYPTION_KEYS": [NEW, "not-a-key-at-all"]})
    assert "not-a-key-at-all" not in str(error.value) and "generate_key" in error.value.hint
    with pytest.raises(ConfigInvalidError, match="must be a list of keys"):
        validate({**BASE, "ENCRYPTION_KEYS": NEW})


def test_crypt_01_keys_without_the_package_are_refused_with_the_extra_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "cryptography.fernet", None)  # as if not installed
    with pytest.raises(ConfigInvalidError, match="cryptography package is not installed") as error:
        validate({**BASE, "ENCRYPTION_KEYS": [NEW]})
    assert error.value.code == "X_CONFIG_INVALID"
    assert "cryptography>=42" in error.value.hint and "encryption extra" in error.value.hint


# --- sealing and opening --------------------------------------------------------------------------


def test_crypt_01_a_sealed_payload_is_json_of_one_marked_key_and_opens_to_the_value():
    with keys(NEW):
        text = crypt.seal('{"email":"ada@example.com"}')
        import json

        stored = json.loads(text)
        assert list(stored) == [crypt.MARK] and EMAIL not in text
        assert crypt.is_sealed(stored)
        assert crypt.unseal(stored) == {"email": EMAIL}
    with override_settings(XJOBS=BASE):
        assert crypt.seal("{}") == "{}"  # no keys: the text as it is
        assert crypt.unseal({"email": EMAIL}) == {"email": EMAIL}  # a clear row reads as ever
        with pytest.raises(EncryptionKeyMissingError, match="ENCRYPTION_KEYS'\\] is not set"):
            crypt.unseal(stored)
        assert crypt.shown(stored) == crypt.NO_KEY


def test_crypt_05_an_old_key_still_opens_after_rotation_and_a_wrong_one_does_not():
    with keys(OLD):
        stored = crypt.seal_value({"email": EMAIL})
    with keys(NEW, OLD):  # rotated: the new key first, the old one kept to decrypt
        assert crypt.unseal(stored) == {"email": EMAIL}
    with keys(NEW):
        with pytest.raises(EncryptionKeyMissingError) as error:
            crypt.unseal(stored)
        assert error.value.code == "X_ENCRYPTION_KEY_MISSING"
        assert crypt.shown(stored) == crypt.NO_KEY


# --- a run, on both drivers -----------------------------------------------------------------------


def test_crypt_02_04_input_step_output_and_result_are_stored_sealed_and_readers_open_them(harness):
    with keys(NEW):
        job_id = jobs.sealed.enqueue(token=token(), email=EMAIL).id
        row = harness.row(job_id)
        assert crypt.is_sealed(row.input) and EMAIL not in str(row.input)
        executions = run_to_the_end(harness)
        assert [e.outcome for e in executions] == [Outcome.RETRIED, Outcome.COMPLETED]
        row = harness.row(job_id)
        assert crypt.is_sealed(row.result) and crypt.unseal(row.result) == {
            "sent_to": EMAIL,
            "looked_up_on": 1,  # the step's output replayed from storage, opened
        }
        [lookup] = [s for s in harness.driver.steps().list(row.run_id) if s.name == "lookup"]
        assert crypt.is_sealed(lookup.output) and EMAIL not in str(lookup.output)
        # readers open what they may show: inspect_job with reveal, masked otherwise
        shown = inspect_job(job_id, reveal=True)
        assert shown["input"]["email"] == EMAIL and shown["result"]["sent_to"] == EMAIL
        assert {s["name"]: s["output"] for s in shown["steps"]}["lookup"]["email"] == EMAIL
        assert inspect_job(job_id)["input"]["email"] == EMAIL


def test_crypt_02_a_row_written_before_keys_were_set_still_runs_and_reads(harness):
    job_id = jobs.sealed.enqueue(token=token(), email=EMAIL).id  # no keys yet: clear
    assert harness.row(job_id).input == {
        "token": harness.row(job_id).input["token"],
        "email": EMAIL,
    }
    with keys(NEW):
        executions = run_to_the_end(harness)
        assert executions[-1].outcome == Outcome.COMPLETED
        assert inspect_job(job_id, reveal=True)["input"]["email"] == EMAIL


def test_crypt_05_a_run_sealed_under_the_old_key_runs_after_rotation(harness):
    with keys(OLD):
        job_id = jobs.sealed.enqueue(token=token(), email=EMAIL).id
    with keys(NEW, OLD):
        executions = run_to_the_end(harness)
        assert executions[-1].outcome == Outcome.COMPLETED
        assert crypt.unseal(harness.row(job_id).result)["sent_to"] == EMAIL


def test_crypt_05_a_worker_without_the_key_parks_the_run_unrun_and_gives_its_attempt_back(harness):
    with keys(OLD):
        job_id = jobs.sealed.enqueue(token=token(), email=EMAIL).id
    before = metrics.value("xjobs_decrypt_failures_total", queue="default")
    with keys(NEW):  # a deploy that lost the old key
        [parked] = run_until_idle()
        assert parked.outcome == Outcome.SUSPENDED
        row = harness.row(job_id)
        assert row.state == "suspended" and row.attempt == 0  # no attempt spent
        assert row.last_error.startswith("X_ENCRYPTION_KEY_MISSING: ")
        assert metrics.value("xjobs_decrypt_failures_total", queue="default") == before + 1
        shown = inspect_job(job_id, reveal=True)  # a reader shows it, never fails on it
        assert shown["input"] == crypt.NO_KEY and inspect_job(job_id)["input"] == crypt.NO_KEY
    with keys(NEW, OLD):  # the key is back: the run goes on as it was written
        harness.advance(3600)
        executions = run_to_the_end(harness)
        assert executions[-1].outcome == Outcome.COMPLETED
        assert crypt.unseal(harness.row(job_id).result)["sent_to"] == EMAIL


def test_crypt_03_encrypt_false_keeps_input_and_result_clear(harness):
    with keys(NEW):
        job_id = jobs.clear_input.enqueue(token="visible").id
        assert harness.row(job_id).input == {"token": "visible"}
        run_until_idle()
        assert harness.row(job_id).result == {"token": "visible"}


def test_crypt_02_the_outbox_copy_is_sealed_and_publishes_the_sealed_row(live_harness):
    with keys(NEW, OUTBOX="auto"):
        store = live_harness.driver.outbox("default")
        staged = store.stage(jobs.sealed.build_request({"token": token(), "email": EMAIL}))
        assert Relay(store=store, driver=live_harness.driver).tick() == 1
        row = live_harness.row(staged)
        assert crypt.is_sealed(row.input) and crypt.unseal(row.input)["email"] == EMAIL


def test_crypt_02_the_outbox_table_holds_only_the_sealed_copy(transactional_db):
    with keys(NEW, OUTBOX="auto"), transaction.atomic():
        jobs.clear_input.enqueue(token="in-clear")
        jobs.sealed.enqueue(token=token(), email=EMAIL)
        stored = {e.job: e.input for e in OutboxEntry.objects.all()}
    assert crypt.is_sealed(stored[jobs.sealed.name]) and EMAIL not in str(stored)
    assert stored[jobs.clear_input.name] == {"token": "in-clear"}


# --- filters that would look inside an input ------------------------------------------------------


def test_crypt_06_an_input_filter_on_encrypted_inputs_is_a_coded_error():
    with keys(NEW):
        with pytest.raises(InputEncryptedError) as error:
            job_filter(input={"email": EMAIL})
        assert error.value.code == "X_INPUT_ENCRYPTED" and isinstance(error.value, JobFilterError)
        with pytest.raises(InputEncryptedError, match="whose inputs are encrypted"):
            job_filter(name=jobs.sealed.name, input={"email": EMAIL})
        assert job_filter(name=jobs.clear_input.name, input={"token": "x"}).input == {"token": "x"}
    with override_settings(XJOBS=BASE):
        assert job_filter(input={"email": EMAIL}).input == {"email": EMAIL}


def test_crypt_06_cancel_on_beside_encrypted_inputs_fails_the_settings_check(monkeypatch):
    from django_xjobs.management.checks import _check_cancel_on_sealed

    monkeypatch.setattr(jobs.clear_input, "cancel_on", {"x.happened": ("token",)})
    monkeypatch.setattr(jobs.sealed, "cancel_on", {"x.happened": ("token",)})
    with keys(NEW):
        found = _check_cancel_on_sealed()
    mine = [m for m in found if "tests.jobs.sealed" in m.msg or "tests.jobs.clear_input" in m.msg]
    assert [(m.id, repr(jobs.sealed.name) in m.msg) for m in mine] == [("django_xjobs.E040", True)]
    assert all(isinstance(m, checks.Error) for m in found)


# --- the cost -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_crypt_02_encryption_adds_no_statement_to_a_run():
    """A sealed job's enqueue and run cost the statements a clear one costs on PostgreSQL (the
    outbox read, the pauses read, the claim, the settle, then the idle pass's two:
    tests/run/test_settle.py pins the same 7): the sealing and opening happen in the process."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from django_xjobs.drivers import install, uninstall
    from django_xjobs.drivers.postgres import PostgresDriver

    counts = []
    for given in ((), (NEW,)):
        driver = PostgresDriver("default")
        install(driver)
        try:
            with keys(*given):
                with CaptureQueriesContext(connection) as enqueued:
                    job_id = jobs.clear_input.enqueue(token=token()).id
                    jobs.ok.enqueue(n=len(given) + 100)
                with CaptureQueriesContext(connection) as ran:
                    run_until_idle(driver=driver)
                assert driver.reads().get_job(job_id).state == "done"
        finally:
            uninstall(driver)
        counts.append((len(enqueued), len(ran)))
    assert counts[0] == counts[1]


# --- the sealed shape is never stored clear (CRYPT-15) ----------------------------------------


@pytest.mark.parametrize("sealed", [False, True])
def test_crypt_15_a_result_of_the_sealed_shape_is_refused_not_stored_clear_and_misread(sealed):
    with override_settings(XJOBS=BASE):
        with pytest.raises(ResultInvalidError, match="reserved for an encrypted payload"):
            _result_json({crypt.MARK: "looks like a token"}, "j", sealed=sealed)
        # one level down, or beside another key, it is plain data
        assert (
            _result_json({"r": {crypt.MARK: "x"}}, "j", sealed=False)
            == '{"r":{"xjobs:fernet":"x"}}'
        )
        assert _result_json({crypt.MARK: "x", "n": 1}, "j", sealed=False) is not None
        assert _result_json({crypt.MARK: 1}, "j", sealed=False) == '{"xjobs:fernet":1}'


def test_crypt_15_a_step_output_and_event_data_of_the_sealed_shape_are_refused_with_a_code():
    with override_settings(XJOBS=BASE):
        with pytest.raises(StepOutputInvalidError, match="reserved for an encrypted payload") as e:
            check_output("charge", {crypt.MARK: "t"})
        assert e.value.code == "X_STEP_OUTPUT_INVALID"
        check_output("charge", [{crypt.MARK: "t"}])  # only the top level reads as sealed
        with pytest.raises(InputInvalidError, match="reserved for an encrypted payload"):
            publish_event("order.shipped", {crypt.MARK: "not a token"})
