"""``job()``: declaration-time validation, the registry, ``describe()`` and input binding.

SPEC §1 (JOB-*), §2 (ENQ-*), DESIGN §2 and §7. Every job declared here has an explicit, unique
``name=`` and is unregistered afterwards by the ``job_names`` fixture.
"""

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from django_xjobs import (
    InputInvalidError,
    InvariantError,
    JobDefinitionError,
    PayloadTooLargeError,
    QueueUnknownError,
    Retry,
    XJobsError,
    errors,
    get_job,
    job,
    registered_jobs,
)
from django_xjobs.declarations.registry import unregister
from tests.jobs import ledger, ok, takes_kwargs

BASE_XJOBS = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "off"}


@pytest.fixture
def job_names() -> Iterator[list[str]]:
    """Names declared by a test; each is unregistered afterwards, pass or fail."""
    names: list[str] = []
    try:
        yield names
    finally:
        for name in names:
            unregister(name)


# Handlers: plain module-level functions, declared inside tests with an explicit name.


def handler(ctx, order_id: int, note: str = ""):
    return {"order_id": order_id}


def first_handler(ctx, n: int = 0):
    return n


def second_handler(ctx, n: int = 0):
    return n


def plain_handler(ctx):
    return None


def open_handler(ctx, **inputs):
    return inputs


def described_handler(
    ctx,
    order_id: int,
    amount: float,
    tags: list,
    meta: dict,
    note: str = "",
    urgent: bool = False,
    anything=None,
    maybe: int | None = None,
):
    return None


CALLS: list[dict] = []


def spy_handler(ctx, n: int = 0):
    CALLS.append({"n": n})


def no_ctx():
    return None


def keyword_only_ctx(*, ctx):
    return None


def only_kwargs(**inputs):
    return None


def with_args(ctx, *args):
    return None


def positional_only(ctx, a, /):
    return None


# --- every bad declaration: JobDefinitionError with a code and a hint -----------------------

DURATION_FIELDS = ["timeout", "step_timeout", "event_poll"]
NON_POSITIVE = [0, -1, -0.5, math.nan, math.inf, timedelta(0), timedelta(seconds=-3), "0s"]


def _bad(declare, code, fragment, id):
    return pytest.param(declare, code, fragment, id=id)


BAD_DECLARATIONS = [
    # JOB-01: no default key exists
    _bad(
        lambda n: job(name=n)(handler),
        "X_IDEMPOTENCY_REQUIRED",
        "idempotency_key",
        "job-01-missing",
    ),
    _bad(
        lambda n: job(name=n, idempotency_key=None)(handler),
        "X_IDEMPOTENCY_REQUIRED",
        "idempotency_key",
        "job-01-none",
    ),
    _bad(
        lambda n: job(name=n, idempotency_key="")(handler),
        "X_IDEMPOTENCY_REQUIRED",
        "idempotency_key",
        "job-01-empty",
    ),
    # key templates are checked against the signature
    _bad(
        lambda n: job(name=n, idempotency_key="charge:{customer_id}")(handler),
        "X_INVARIANT",
        "customer_id",
        "key-names-unknown-input",
    ),
    _bad(
        lambda n: job(name=n, idempotency_key="charge:{0}")(handler),
        "X_INVARIANT",
        "positional",
        "key-positional-0",
    ),
    _bad(
        lambda n: job(name=n, idempotency_key="charge:{}")(handler),
        "X_INVARIANT",
        "positional",
        "key-positional-empty",
    ),
    _bad(
        lambda n: job(name=n, idempotency_key="charge:{order_id")(handler),
        "X_INVARIANT",
        "idempotency_key",
        "key-malformed-template",
    ),
    _bad(
        lambda n: job(name=n, idempotency_key=42)(handler),
        "X_INVARIANT",
        "idempotency_key",
        "key-not-str-nor-callable",
    ),
    # JOB-04 / SE-23: concurrency is a positive integer or omitted
    *[
        _bad(
            lambda n, c=c: job(name=n, idempotency_key="k:{order_id}", concurrency=c)(handler),
            "X_INVARIANT",
            "concurrency",
            f"job-04-concurrency-{c!r}",
        )
        # issue 40: past the bound a claim compared it as a number no column holds
        for c in (0, -1, 1.5, True, "2", 10**20, 10_001)
    ],
    # JOB-05: non-positive / non-finite durations name the field
    *[
        _bad(
            lambda n, f=f, v=v: job(name=n, idempotency_key="k:{order_id}", **{f: v})(handler),
            "X_INVARIANT",
            f": {f}=",
            f"job-05-{f}-{v!r}",
        )
        for f in DURATION_FIELDS
        for v in NON_POSITIVE
    ],
    # an unreadable duration has its own code
    *[
        _bad(
            lambda n, f=f: job(name=n, idempotency_key="k:{order_id}", **{f: "soon"})(handler),
            "X_DURATION_INVALID",
            f": {f}=",
            f"duration-invalid-{f}",
        )
        for f in DURATION_FIELDS
    ],
    _bad(
        lambda n: job(name=n, idempotency_key="k:{order_id}", timeout="3")(handler),
        "X_DURATION_INVALID",
        ": timeout=",
        "duration-bare-number-string",
    ),
    # retry must be a Retry
    _bad(
        lambda n: job(name=n, idempotency_key="k:{order_id}", retry={"attempts": 5})(handler),
        "X_INVARIANT",
        "retry",
        "retry-dict",
    ),
    _bad(
        lambda n: job(name=n, idempotency_key="k:{order_id}", retry=5)(handler),
        "X_INVARIANT",
        "retry",
        "retry-int",
    ),
    # the handler's shape
    _bad(lambda n: job(name=n, idempotency_key="k")(no_ctx), "X_INVARIANT", "context", "no-ctx"),
    _bad(
        lambda n: job(name=n, idempotency_key="k")(keyword_only_ctx),
        "X_INVARIANT",
        "context",
        "keyword-only-ctx",
    ),
    _bad(
        lambda n: job(name=n, idempotency_key="k")(only_kwargs),
        "X_INVARIANT",
        "context",
        "only-kwargs",
    ),
    _bad(lambda n: job(name=n, idempotency_key="k")(with_args), "X_INVARIANT", "*args", "args"),
    _bad(
        lambda n: job(name=n, idempotency_key="k")(positional_only),
        "X_INVARIANT",
        "parameter a",
        "positional-only-input",
    ),
    _bad(
        lambda n: job(5, name=n, idempotency_key="k"),
        "X_INVARIANT",
        "function",
        "not-callable",
    ),
    # queue names
    *[
        _bad(
            lambda n, q=q: job(name=n, idempotency_key="k:{order_id}", queue=q)(handler),
            "X_INVARIANT",
            "queue",
            f"queue-{q!r}"[:30],
        )
        for q in ("bad queue!", "", "-leading-dash", "x" * 65, 5)
    ],
    # priority range
    *[
        _bad(
            lambda n, p=p: job(name=n, idempotency_key="k:{order_id}", priority=p)(handler),
            "X_INVARIANT",
            "priority",
            f"priority-{p!r}",
        )
        for p in (1001, -1001, 1.5, True, "1")
    ],
    # tenant must be a callable
    _bad(
        # SPEC JOB-02: neither a callable nor the one literal ("required" here)
        lambda n: job(name=n, idempotency_key="k:{order_id}", tenant="acme")(handler),
        "X_JOB_TENANT_REQUIRED",
        "tenant",
        "tenant-not-callable",
    ),
]


@pytest.mark.parametrize(("declare", "code", "fragment"), BAD_DECLARATIONS)
def test_bad_declaration_is_refused_at_declaration(declare, code, fragment, job_names):
    """DESIGN §2/§6: a bad declaration raises JobDefinitionError with a code and a hint
    (``concurrency=0`` among them: SPEC SE-23)."""
    name = "test_definitions.bad"
    job_names.append(name)
    with pytest.raises(JobDefinitionError) as caught:
        declare(name)
    error = caught.value
    assert error.code == code
    assert isinstance(error, errors.CODES[code])  # the class that owns the code (issue 41)
    assert fragment in error.message
    assert str(error).startswith(f"{code}: ")
    assert error.hint, f"no hint for: {error}"
    assert get_job(name) is None


@pytest.mark.parametrize("bad_name", ["", "   ", "x" * 201, 5])
def test_invalid_name_is_refused(bad_name):
    with pytest.raises(JobDefinitionError) as caught:
        job(name=bad_name, idempotency_key="k:{order_id}")(handler)
    assert caught.value.code == "X_INVARIANT"
    assert "name=" in caught.value.message
    assert get_job(f"{__name__}.handler") is None


def test_invalid_name_error_has_a_hint():
    """DESIGN §6: a malformed declaration gets a code AND a hint."""
    with pytest.raises(JobDefinitionError) as caught:
        job(name="", idempotency_key="k:{order_id}")(handler)
    assert caught.value.hint, f"no hint for: {caught.value}"


def test_job_01_bare_decorator_without_key_is_refused():
    """JOB-01: ``@job`` with no arguments has no key, so it is refused."""
    with pytest.raises(JobDefinitionError) as caught:
        job(plain_handler)
    assert caught.value.code == "X_IDEMPOTENCY_REQUIRED"
    assert caught.value.hint
    assert get_job(f"{__name__}.plain_handler") is None


def test_job_05_messages_name_the_exact_field():
    """JOB-05: a bad ``timeout`` names ``timeout``, not ``step_timeout``, and vice versa."""
    with pytest.raises(JobDefinitionError) as caught:
        job(name="test_definitions.t", idempotency_key="k", timeout=0)(plain_handler)
    assert "step_timeout" not in caught.value.message
    assert "event_poll" not in caught.value.message
    with pytest.raises(JobDefinitionError) as caught:
        job(name="test_definitions.t", idempotency_key="k", event_poll=-1)(plain_handler)
    assert "event_poll" in caught.value.message
    assert get_job("test_definitions.t") is None


def test_job_defined_inside_a_function_needs_a_name():
    """A handler with ``<locals>`` in its qualname is never imported by a worker."""

    def local_handler(ctx):
        return None

    with pytest.raises(JobDefinitionError) as caught:
        job(idempotency_key="k")(local_handler)
    assert caught.value.code == "X_INVARIANT"
    assert "inside a function" in caught.value.message
    assert "name=" in caught.value.hint
    assert not any("<locals>" in h.name for h in registered_jobs())


def test_job_defined_inside_a_function_with_a_name_is_allowed(job_names):
    def local_handler(ctx):
        return None

    job_names.append("test_definitions.local")
    handle = job(name="test_definitions.local", idempotency_key="k")(local_handler)
    assert get_job("test_definitions.local") is handle


# --- accepted declarations ------------------------------------------------------------------


def test_job_04_concurrency_omitted_means_no_cap(job_names):
    job_names.extend(["test_definitions.nocap", "test_definitions.cap"])
    assert (
        job(name="test_definitions.nocap", idempotency_key="k")(plain_handler).concurrency is None
    )
    capped = job(name="test_definitions.cap", idempotency_key="k", concurrency=1)(plain_handler)
    assert capped.concurrency == 1


def test_job_06_durations_are_exposed_in_seconds(job_names):
    """JOB-06 (DESIGN §7: seconds): 1m -> 60, 25s -> 25, 5s -> 5."""
    job_names.append("test_definitions.durations")
    handle = job(
        name="test_definitions.durations",
        idempotency_key="k",
        timeout="1m",
        step_timeout="25s",
        event_poll="5s",
    )(plain_handler)
    assert handle.timeout == 60
    assert handle.step_timeout == 25
    assert handle.event_poll == 5


def test_job_06_durations_in_other_forms(job_names):
    job_names.append("test_definitions.durations2")
    handle = job(
        name="test_definitions.durations2",
        idempotency_key="k",
        timeout=timedelta(minutes=2),
        step_timeout=1.5,
        event_poll="PT10S",
    )(plain_handler)
    assert (handle.timeout, handle.step_timeout, handle.event_poll) == (120, 1.5, 10)


def test_job_06_omitted_durations_are_none(job_names):
    job_names.append("test_definitions.nodurations")
    handle = job(name="test_definitions.nodurations", idempotency_key="k")(plain_handler)
    assert handle.timeout is None
    assert handle.step_timeout is None
    assert handle.event_poll is None


def test_job_07_defaults(job_names):
    """JOB-07: default Retry (3, exponential, 1 s, 3600 s, jitter, dead letter), queue default."""
    job_names.append("test_definitions.defaults")
    handle = job(name="test_definitions.defaults", idempotency_key="k")(plain_handler)
    assert handle.retry.attempts == 3
    assert handle.retry.backoff == "exponential"
    assert handle.retry.delay_seconds == 1
    assert handle.retry.max_delay_seconds == 3600
    assert handle.retry.jitter is True
    assert handle.retry.dead_letter is True
    assert handle.queue == "default"
    assert handle.priority == 0
    assert handle.concurrency is None
    assert handle.tenant is None


def test_job_07_declared_retry_is_kept(job_names):
    job_names.append("test_definitions.retry")
    policy = Retry(attempts=5, backoff="linear", delay="2s")
    handle = job(name="test_definitions.retry", idempotency_key="k", retry=policy)(plain_handler)
    assert handle.retry is policy
    assert handle.retry.max_delay_seconds == 3600  # undeclared fields keep the defaults


def test_default_name_is_module_and_qualname(job_names):
    """DESIGN §2: the default name is ``"<module>.<qualname>"`` (not ``anonymous-job-<n>``).
    SPEC JOB-10, JOB-13: the name comes from the function, not from the variable the handle is
    bound to."""
    expected = f"{__name__}.plain_handler"
    assert expected == "tests.declarations.test_job.plain_handler"
    job_names.append(expected)
    handle = job(idempotency_key="k")(plain_handler)
    assert handle.name == expected
    assert get_job(expected) is handle


def test_module_jobs_use_their_default_names():
    """SPEC JOB-10."""
    assert ok.name == "tests.jobs.ok"
    assert get_job("tests.jobs.ok") is ok


def test_async_handler_is_accepted(job_names):
    async def run(ctx, n: int = 0):
        return n

    job_names.append("test_definitions.async")
    handle = job(name="test_definitions.async", idempotency_key="a:{n}")(run)
    assert handle.is_async is True


def test_callable_key_and_open_ended_template_are_accepted(job_names):
    job_names.extend(["test_definitions.callable_key", "test_definitions.open_template"])
    keyed = job(name="test_definitions.callable_key", idempotency_key=lambda order_id, **_: "x")(
        handler
    )
    assert callable(keyed.idempotency_key)
    open_ended = job(name="test_definitions.open_template", idempotency_key="k:{anything}")(
        open_handler
    )
    assert open_ended.key_for({"anything": 7}) == "k:7"


def test_key_template_formats_the_inputs(job_names):
    job_names.append("test_definitions.template")
    handle = job(name="test_definitions.template", idempotency_key="charge:{order_id}:{note}")(
        handler
    )
    assert handle.key_for(handle.bind({"order_id": 7})) == "charge:7:"


# --- registry: duplicates (JOB-11) and ordering (JOB-16) ------------------------------------


def test_job_14_a_declared_name_is_kept_whatever_the_function_is_called(job_names):
    """SPEC JOB-14: ``name=`` is the key a job's queued rows are stored under, so it is kept
    whatever the function is called or the handle is exported as."""
    job_names.append("billing.charge")
    charge = job(name="billing.charge", idempotency_key="c:{n}")(first_handler)
    exported_as = charge
    assert exported_as.name == "billing.charge" and get_job("billing.charge") is charge
    assert get_job(f"{__name__}.first_handler") is None


def test_job_11_duplicate_name_is_refused_and_first_stays(job_names):
    """SPEC SE-27: a second declaration never takes over the first one's queued rows."""
    name = "test_definitions.dup"
    job_names.append(name)
    first = job(name=name, idempotency_key="d:{n}")(first_handler)
    with pytest.raises(JobDefinitionError) as caught:
        job(name=name, idempotency_key="d:{n}")(second_handler)
    error = caught.value
    assert error.code == "X_JOB_DUPLICATE"
    assert "first_handler" in error.message
    assert "second_handler" in error.message
    assert error.hint
    assert get_job(name) is first


def test_job_11_duplicate_of_a_module_job_is_refused():
    with pytest.raises(JobDefinitionError) as caught:
        job(name="tests.jobs.ok", idempotency_key="d:{n}")(first_handler)
    assert caught.value.code == "X_JOB_DUPLICATE"
    assert get_job("tests.jobs.ok") is ok


def test_redeclaring_the_same_function_is_allowed(job_names):
    """DESIGN §2: the same module+qualname under the same name (re-import, autoreload)."""
    name = "test_definitions.redeclared"
    job_names.append(name)
    first = job(name=name, idempotency_key="d:{n}")(first_handler)
    second = job(name=name, idempotency_key="d:{n}")(first_handler)
    assert second is not first
    assert get_job(name) is second


def test_job_16_registered_jobs_sorted_by_code_unit(job_names):
    """JOB-16 / SE-26: code-unit order, never locale collation."""
    prefix = "test_definitions.sort."
    suffixes = ["b", "é", "B", "_", "a", "Z"]
    for suffix in suffixes:
        job_names.append(prefix + suffix)
        job(name=prefix + suffix, idempotency_key="k")(plain_handler)
    names = [h.name for h in registered_jobs()]
    assert names == sorted(names)
    ours = [n[len(prefix) :] for n in names if n.startswith(prefix)]
    assert ours == ["B", "Z", "_", "a", "b", "é"]


# --- describe() (JOB-17, JOB-18) ------------------------------------------------------------


def test_job_17_describe(job_names):
    name = "test_definitions.describe"
    job_names.append(name)
    handle = job(
        name=name,
        idempotency_key="secret-template:{order_id}",
        queue="reports",
        retry=Retry(attempts=4, backoff="linear"),
    )(described_handler)
    manifest = handle.describe()
    assert manifest["name"] == name
    assert manifest["queue"] == "reports"
    assert manifest["retry"] == {"attempts": 4, "backoff": "linear"}
    assert manifest["steps"] == []
    schema = manifest["input"]
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    properties = schema["properties"]
    assert properties["order_id"] == {"type": "integer"}
    assert properties["amount"] == {"type": "number"}
    assert properties["tags"] == {"type": "array"}
    assert properties["meta"] == {"type": "object"}
    assert properties["note"] == {"type": "string"}
    assert properties["urgent"] == {"type": "boolean"}
    assert properties["anything"] == {}
    assert "maybe" in properties
    assert "ctx" not in properties
    assert schema["required"] == ["order_id", "amount", "tags", "meta"]


def test_job_18_describe_is_idempotent_and_never_leaks_the_key(job_names):
    name = "test_definitions.describe_key"
    job_names.append(name)
    handle = job(name=name, idempotency_key="secret-template:{order_id}")(handler)
    manifest = handle.describe()
    assert manifest["idempotent"] is True
    text = json.dumps(manifest)  # plain JSON
    assert "secret-template" not in text
    assert json.loads(text) == manifest


def test_describe_of_kwargs_handler_is_open():
    schema = takes_kwargs.describe()["input"]
    assert schema["additionalProperties"] is True
    assert schema["properties"] == {}
    assert schema["required"] == []


def test_job_17_describe_reads_postponed_annotations():
    """tests/jobs.py uses ``from __future__ import annotations`` (string annotations), as
    much real code does; ``n: int`` must still read as an integer in the manifest."""
    assert ok.describe()["input"]["properties"]["n"] == {"type": "integer"}
    assert ledger.describe()["input"]["properties"]["token"] == {"type": "string"}
    assert ledger.describe()["input"]["required"] == ["token"]


# --- a handle is not called directly; enqueue never runs it (JOB-19) ------------------------


def test_calling_a_handle_directly_is_refused():
    with pytest.raises(InvariantError) as caught:
        ok(None, n=1)
    assert "enqueue" in caught.value.hint
    with pytest.raises(InvariantError):
        ok()


def test_job_19_enqueue_never_runs_the_handler_inline(harness, job_names):
    name = "test_definitions.spy"
    job_names.append(name)
    CALLS.clear()
    handle = job(name=name, idempotency_key="spy:{n}")(spy_handler)
    result = handle.enqueue(n=3)
    assert CALLS == []
    row = harness.row(result.id)
    assert row.name == name
    assert row.state == "ready"
    assert row.attempt == 0
    assert row.input == {"n": 3}


def test_enqueue_writes_one_row(harness):
    """Positive control for the 'nothing written' checks below."""
    result = ok.enqueue(n=1)
    rows = harness.driver.reads().list_jobs()
    assert [r.id for r in rows] == [result.id]
    assert rows[0].idempotency_key == "ok:1"
    assert rows[0].input == {"n": 1}


# --- inputs are bound and checked at enqueue; nothing is written on refusal -----------------


def test_unknown_input_is_refused(harness):
    with pytest.raises(InputInvalidError) as caught:
        ledger.enqueue(token="t", colour="red")
    error = caught.value
    assert error.code == "X_INPUT_INVALID"
    assert "colour" in error.message
    for parameter in ("token", "hold", "hold_attempts", "heed_signal"):
        assert parameter in error.hint
    assert harness.driver.reads().list_jobs() == []


def test_missing_required_input_is_refused(harness):
    with pytest.raises(InputInvalidError) as caught:
        ledger.enqueue(hold=1.0)
    error = caught.value
    assert error.code == "X_INPUT_INVALID"
    assert "token" in error.message
    assert "token" in error.hint
    assert harness.driver.reads().list_jobs() == []


def test_ctx_is_not_an_input(harness):
    with pytest.raises(InputInvalidError):
        ok.enqueue(ctx="x")
    assert harness.driver.reads().list_jobs() == []


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (math.nan, "nan"),
        (math.inf, "inf"),
        ("a\x00b", "NUL"),
        (datetime(2024, 1, 1, tzinfo=UTC), "isoformat"),
        ({1, 2}, "set"),
    ],
    ids=["nan", "inf", "nul", "datetime", "set"],
)
def test_non_json_input_is_refused(harness, value, fragment):
    """DESIGN §7 Payloads: inputs must be JSON; the error names the input."""
    with pytest.raises(InputInvalidError) as caught:
        ok.enqueue(n=value)
    error = caught.value
    assert error.code == "X_INPUT_INVALID"
    assert "inputs.n" in error.message
    assert fragment in error.message
    assert error.hint
    assert harness.driver.reads().list_jobs() == []


def test_non_json_nested_input_names_its_path(harness):
    with pytest.raises(InputInvalidError) as caught:
        takes_kwargs.enqueue(items=[1, {"x": math.nan}])
    assert "inputs.items[1].x" in caught.value.message
    assert harness.driver.reads().list_jobs() == []


def test_oversize_input_is_refused(harness):
    with override_settings(XJOBS={**BASE_XJOBS, "MAX_PAYLOAD_BYTES": 100}):
        ledger.enqueue(token="small")  # under the cap: accepted
        with pytest.raises(PayloadTooLargeError) as caught:
            ledger.enqueue(token="x" * 200)
    error = caught.value
    assert error.code == "X_PAYLOAD_TOO_LARGE"
    assert "100" in error.message
    assert error.hint
    assert [r.input["token"] for r in harness.driver.reads().list_jobs()] == ["small"]


@pytest.mark.parametrize("key", ["", 42, None], ids=["empty", "int", "none"])
def test_job_08_key_callable_must_return_a_non_empty_string(harness, job_names, key):
    name = "test_definitions.badkey"
    job_names.append(name)
    handle = job(name=name, idempotency_key=lambda order_id, note="": key)(handler)
    with pytest.raises(InvariantError) as caught:
        handle.enqueue(order_id=1)
    assert caught.value.code == "X_INVARIANT"
    assert caught.value.hint
    assert harness.driver.reads().list_jobs() == []


def test_open_template_missing_its_input_is_refused_cleanly(harness, job_names):
    """A ``**inputs`` handler whose key template names an input not given at enqueue gets a
    library error (not a bare KeyError), and nothing is written."""
    name = "test_definitions.open_missing"
    job_names.append(name)
    handle = job(name=name, idempotency_key="k:{account_id}")(open_handler)
    with pytest.raises((InputInvalidError, InvariantError)) as caught:
        handle.enqueue(other=1)
    assert "account_id" in str(caught.value)
    assert harness.driver.reads().list_jobs() == []


@pytest.mark.parametrize("tenant", ["", 7], ids=["empty", "int"])
def test_tenant_callable_must_return_a_non_empty_string(harness, job_names, tenant):
    """DESIGN §7 Tenant / JOB-09."""
    name = "test_definitions.badtenant"
    job_names.append(name)
    handle = job(name=name, idempotency_key="k:{order_id}", tenant=lambda **_: tenant)(handler)
    with pytest.raises(InvariantError) as caught:
        handle.enqueue(order_id=1)
    assert caught.value.code == "X_INVARIANT"
    assert harness.driver.reads().list_jobs() == []


def test_tenant_callable_sets_tenant_id(harness, job_names):
    name = "test_definitions.tenant"
    job_names.append(name)
    handle = job(
        name=name, idempotency_key="k:{order_id}", tenant=lambda order_id, **_: f"t{order_id}"
    )(handler)
    result = handle.enqueue(order_id=4)
    assert harness.row(result.id).tenant_id == "t4"


def test_enqueue_to_an_unknown_queue_is_refused(harness):
    with pytest.raises(QueueUnknownError) as caught:
        ok.using(queue="nope").enqueue(n=1)
    assert caught.value.code == "X_QUEUE_UNKNOWN"
    assert "nope" in caught.value.message
    assert caught.value.hint
    assert harness.driver.reads().list_jobs() == []


def test_enqueue_to_a_listed_queue_is_accepted(harness):
    result = ok.using(queue="other").enqueue(n=1)
    assert harness.row(result.id).queue == "other"


# --- using() validates its options at once --------------------------------------------------


def test_using_naive_run_at_is_refused():
    with pytest.raises(InvariantError) as caught:
        ok.using(run_at=datetime(2030, 1, 1))
    assert "aware" in caught.value.message


def test_using_run_at_and_delay_together_is_refused():
    with pytest.raises(InvariantError):
        ok.using(run_at=datetime(2030, 1, 1, tzinfo=UTC), delay="5m")


def test_using_bogus_on_conflict_is_refused():
    with pytest.raises(InvariantError) as caught:
        ok.using(on_conflict="bogus")
    assert "on_conflict" in caught.value.message


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"queue": "bad queue!"}, InvariantError),
        ({"priority": 5000}, InvariantError),
        ({"tenant_id": ""}, InvariantError),
        ({"enqueued_by": 5}, InvariantError),
        ({"delay": "soon"}, XJobsError),
        ({"delay": -5}, InvariantError),
    ],
    ids=["queue", "priority", "tenant", "enqueued_by", "delay-garbage", "delay-negative"],
)
def test_using_other_bad_options_are_refused(options, error):
    with pytest.raises(error):
        ok.using(**options)


def test_using_returns_a_copy():
    other = ok.using(queue="other", priority=9)
    assert other is not ok
    assert other.options.queue == "other"
    assert other.options.priority == 9
    assert ok.options.queue is None
    assert ok.options.priority is None
