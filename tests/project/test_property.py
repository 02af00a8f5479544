"""Properties of the whole path, enqueue -> stage (inside ``atomic()``) -> publish -> claim ->
run -> settle, over generated inputs, idempotency keys, tenants, actors, queue names, delays,
handler results and error messages (issue 24 §6). Each example runs on the memory driver AND
the PostgreSQL driver, with real commits, and asserts:

- whatever the API accepts is published, claimed, run and settled with a coded outcome: the
  row ends ``done`` with the value returned, or ``dead`` with an error that names what failed;
  its input reads back as given;
- whatever it refuses raises an ``XJobsError`` subclass and writes nothing (``x_jobs`` and
  ``x_outbox`` stay empty);
- no accepted value blocks another job: a plain job staged beside it completes;
- both drivers give the same answer.

``make test`` runs the ``ci`` profile (a few dozen examples); ``make property`` the ``long`` one
(``HYPOTHESIS_PROFILE=long``).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.test import override_settings
from hypothesis import HealthCheck, Phase, event, example, given, note, settings
from hypothesis import strategies as st

from django_xjobs import Retry, TerminalError, job
from django_xjobs.conf import QUEUE_NAME
from django_xjobs.drivers import install, uninstall
from django_xjobs.drivers.contract import EnqueueRequest
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.drivers.postgres import PostgresDriver
from django_xjobs.errors import InputInvalidError, XJobsError
from django_xjobs.limits.keys import SEPARATOR, JobLimits, check_template
from django_xjobs.run.execution import Outcome
from django_xjobs.run.publish import publish_batch
from django_xjobs.testing import relay_staged, run_until_idle

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
_COMMON: dict[str, Any] = {
    "deadline": None,
    "database": None,
    # the explain phase re-runs a failure many times over to name its lines: minutes here
    "phases": [Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    # one example resets the stores itself (fresh memory driver, emptied tables): the
    # function-scoped database fixture is shared on purpose
    "suppress_health_check": [
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
}
settings.register_profile("ci", max_examples=40, derandomize=True, **_COMMON)
settings.register_profile("long", max_examples=1000, **_COMMON)

QUEUES = ["other", "prop.q-1:x"]
XJOBS = {"QUEUES": QUEUES, "POLL_INTERVAL": 0.2, "OUTBOX": "auto"}


def text_of(points: list[int]) -> str:
    """Inputs are JSON, which carries no NUL: texts with any code point travel as lists of them."""
    return "".join(map(chr, points))


@job(
    name="test_property.subject",
    idempotency_key=lambda **i: text_of(i["key"]),
    retry=Retry(attempts=1),
)
def subject(ctx, key, payload, act="return", result=None, message=None):
    if act == "raise":
        raise ValueError(text_of(message or []))
    if act == "terminal":
        raise TerminalError(text_of(message or []))
    return result


@job(name="test_property.neighbour", idempotency_key="neighbour:{n}")
def neighbour(ctx, n: int):
    return n


# --- strategies ---------------------------------------------------------------------------------
# Each field is drawn valid most of the time and hostile the rest, so that most examples get as
# far as a run (one hostile field refuses the whole enqueue and hides every later property).

#: the code points a store or a terminal chokes on, drawn often rather than once in a million
HOSTILE = [0x00, 0xD83D, 0xDC00, 0x1B, 0x0A, 0x7F, 0xFFFF]
#: every code point: NUL, controls, lone surrogates, astral planes
ANY_CHAR = st.characters(
    codec=None, min_codepoint=0, max_codepoint=0x10FFFF, categories=None
) | st.sampled_from([chr(c) for c in HOSTILE])
#: what a store can hold: no NUL, no lone surrogate (accents, scripts, emoji, controls)
PLAIN_CHAR = st.characters(codec="utf-8", exclude_characters="\x00")
PLAIN_TEXT = st.text(PLAIN_CHAR, max_size=30)
ANY_TEXT = st.text(ANY_CHAR, max_size=30)
PLAIN_POINTS = st.lists(st.integers(0x01, 0xD7FF) | st.integers(0xE000, 0x10FFFF), max_size=20)
POINTS = st.one_of(
    *[PLAIN_POINTS] * 4, st.lists(st.integers(0, 0x10FFFF) | st.sampled_from(HOSTILE), max_size=20)
)
BIG_INT = st.builds(
    lambda digits, sign: sign * 10**digits, st.integers(15, 4000), st.sampled_from([1, -1])
)
PLAIN_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    BIG_INT,
    # every finite float, past 2**53 too: each store reads back the float written (SPEC DRV-05)
    st.floats(allow_nan=False, allow_infinity=False),
    PLAIN_TEXT,
)
HOSTILE_SCALARS = st.one_of(
    PLAIN_SCALARS,
    st.sampled_from([math.nan, math.inf, -math.inf]),  # not JSON: must be refused
    ANY_TEXT,
)


def json_of(scalars, keys):
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
        max_leaves=12,
    )


PLAIN_JSON = json_of(PLAIN_SCALARS, PLAIN_TEXT)
HOSTILE_JSON = json_of(HOSTILE_SCALARS, ANY_TEXT)


@dataclass(frozen=True)
class Deep:
    """A value nested ``depth`` levels, built only when enqueued: a printed example stays short
    (the printer recurses too)."""

    depth: int
    leaf: Any

    def build(self) -> Any:
        value = self.leaf
        for level in range(self.depth):
            value = [value] if level % 2 else {"d": value}
        return value


@dataclass(frozen=True)
class Huge:
    """An int of ``digits`` digits, built only when enqueued (past 4,300 digits Python will not
    even print it)."""

    digits: int

    def build(self) -> Any:
        return {"n": -(10 ** (self.digits - 1))}


def typed(value: Any) -> Any:
    """``value`` with each scalar paired with its type: a float read back as an int differs."""
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [typed(item) for item in value]
    return (type(value).__name__, value)


def built(value: Any) -> Any:
    return value.build() if isinstance(value, Deep | Huge) else value


DEEP = st.builds(Deep, st.sampled_from([50, 500, 900, 990, 1200, 3000, 10_000]), PLAIN_SCALARS)
#: mostly plain JSON; now and then a hostile text or number, a value nested past a decoder's
#: reach, or an int past 4,300 digits
VALUES = st.one_of(*[PLAIN_JSON] * 6, HOSTILE_JSON, DEEP, st.builds(Huge, st.integers(4200, 6000)))
#: long incompressible keys and tenants: past a btree index row at some length (issue 24 §1)
LONG_POINTS = st.lists(st.integers(0x20, 0xD7FF), min_size=500, max_size=3000)
KEYS = st.one_of(*[PLAIN_POINTS.filter(bool)] * 6, POINTS, LONG_POINTS)
NAMES = st.one_of(
    *[st.none()] * 4,
    *[st.text(PLAIN_CHAR, min_size=1, max_size=30)] * 2,
    ANY_TEXT,
    st.text(PLAIN_CHAR, min_size=1500, max_size=3000),
)
QUEUE_NAMES = st.one_of(
    *[st.none()] * 4,
    st.sampled_from(["default", *QUEUES]),
    st.sampled_from(["default\n", "other\n", " default", "nope", ""]),
    ANY_TEXT,
)
DELAYS = st.one_of(
    *[st.none()] * 4,
    st.floats(0.001, 86_400),
    st.sampled_from(["10s", "1h", "3d", timedelta(minutes=5)]),
    st.one_of(
        st.floats(),  # NaN, the infinities, negatives, 1e300
        st.integers(-10, 10**6),
        st.integers(10**6, 10**14),
        st.sampled_from(["99999999w", "-1s", "0s", "soon", "1e300", ""]),
        st.builds(timedelta, seconds=st.integers(-100, 10**9)),
    ),
)
MESSAGES = st.one_of(
    *[PLAIN_POINTS] * 3, POINTS, st.lists(st.integers(1, 0xD7FF), min_size=1000, max_size=5000)
)


@dataclass(frozen=True)
class Case:
    payload: Any
    key: list[int]
    act: str
    result: Any
    message: list[int]
    tenant: str | None
    actor: str | None
    queue: str | None
    delay: Any
    staged: bool
    #: filled as the example runs, for the report of a failure
    seen: list[str] = field(default_factory=list, compare=False)

    def inputs(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "payload": built(self.payload),
            "act": self.act,
            "result": built(self.result),
            "message": self.message,
        }


CASES = st.builds(
    Case,
    payload=VALUES,
    key=KEYS,
    act=st.sampled_from(["return", "return", "raise", "terminal"]),
    result=VALUES,
    message=MESSAGES,
    tenant=NAMES,
    actor=NAMES,
    queue=QUEUE_NAMES,
    delay=DELAYS,
    staged=st.booleans(),
)


# --- one example, on one driver -----------------------------------------------------------------


def fresh(kind: str):
    """An empty store for one example: a new memory driver, or emptied tables."""
    if kind == "memory":
        return MemoryDriver()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM x_job_steps; DELETE FROM x_outbox; DELETE FROM x_jobs")
    return PostgresDriver("default")


def written(driver) -> tuple[int, int]:
    """Rows in the job table and the outbox."""
    if isinstance(driver, MemoryDriver):
        outbox = driver._outbox._rows if driver._outbox is not None else {}
        return len(driver._rows), len(outbox)
    with connection.cursor() as cursor:
        cursor.execute("SELECT (SELECT count(*) FROM x_jobs), (SELECT count(*) FROM x_outbox)")
        return tuple(cursor.fetchone())


def enqueue(case: Case):
    handle = subject.using(
        queue=case.queue,
        delay=case.delay,
        tenant_id=case.tenant,
        enqueued_by=case.actor,
        outbox=None if case.staged else False,
    )
    return handle.enqueue(**case.inputs())


def make_due(driver, job_id) -> None:
    """Skip the subject's delay, as waiting would (the harness moves rows, never sleeps)."""
    if isinstance(driver, MemoryDriver):
        driver._rows[job_id] = replace(driver._rows[job_id], run_at=driver.clock.now())
        return
    with connection.cursor() as cursor:
        cursor.execute("UPDATE x_jobs SET run_at = now() WHERE id = %s", [job_id])


def verdict(kind: str, case: Case) -> tuple[str, ...]:
    """Run ``case`` on a fresh ``kind`` store; what happened, asserting the properties."""
    driver = fresh(kind)
    install(driver)
    try:
        return _verdict(driver, case)
    finally:
        uninstall(driver)


def _verdict(driver, case: Case) -> tuple[str, ...]:
    refused: XJobsError | None = None
    with transaction.atomic():
        try:
            accepted = enqueue(case)
        except XJobsError as error:
            refused = error
        else:
            beside = neighbour.using(queue=case.queue or "default").enqueue(n=1)
    if refused is not None:
        case.seen.append(f"refused: {refused}"[:300])
        assert refused.code.startswith("X_") and refused.hint is not None
        assert written(driver) == (0, 0), "a refused enqueue wrote a row"
        return ("refused", refused.code)
    relay_staged(driver)  # whatever the commit's fast path left behind, as the relay would
    queues = sorted({case.queue or "default", "default"})
    runs = run_until_idle(queues=queues, driver=driver, max_runs=20)
    row = driver.reads().get_job(accepted.id)
    assert row is not None, "an accepted enqueue was never published"
    if row.state == "delayed":
        make_due(driver, accepted.id)
        runs += run_until_idle(queues=queues, driver=driver, max_runs=20)
        row = driver.reads().get_job(accepted.id)
    case.seen.append(f"{row.state}: {row.last_error!r}"[:300])
    ran = [r for r in runs if r.job.id == accepted.id]
    assert [r.outcome for r in ran] in (
        [Outcome.COMPLETED],
        [Outcome.DEAD_LETTERED],
    ), f"the subject ran as {[r.outcome for r in ran]}"
    # what was accepted reads back as given, each number as the type it was given as
    assert typed(row.input) == typed(subject.bind(case.inputs()))
    assert (row.tenant_id, row.enqueued_by) == (case.tenant, case.actor)
    assert QUEUE_NAME.fullmatch(row.queue)
    if row.state == "done":
        assert case.act == "return" and typed(row.result) == typed(built(case.result))
        assert row.last_error is None
    else:
        assert row.state == "dead" and row.last_error and row.stop_reason
        assert not row.last_error.startswith("X_JOB_CRASHED"), row.last_error
        if case.act == "return":  # a result the store refuses: its own code
            assert re.match(r"X_[A-Z_]+: ", row.last_error), row.last_error
        else:
            raised = "ValueError" if case.act == "raise" else "X_TERMINAL"
            assert row.last_error.startswith(raised), row.last_error
    other = driver.reads().get_job(beside.id)
    assert other is not None and other.state == "done", "a neighbour was blocked"
    return (row.state, row.last_error.split(":")[0] if row.last_error else "")


#: numbers past 2**53, once kept out of the floats drawn above: PostgreSQL read such a float
#: back as an int (issue 39); every run tries them, staged and direct
BIG_NUMBERS = Case(
    payload={"float": 1.2345678901234567e25, "bigint": 2**63 - 1, "list": [-3.5e16, 10**30]},
    key=[ord("n")],
    act="return",
    result={"float": 1e20, "tiny": 5e-324, "largest": 1.7976931348623157e308},
    message=[],
    tenant=None,
    actor=None,
    queue=None,
    delay=None,
    staged=True,
)


@settings(settings.get_profile(PROFILE))
@given(case=CASES)
@example(case=BIG_NUMBERS)
@example(case=replace(BIG_NUMBERS, staged=False, seen=[]))
def test_whatever_is_accepted_runs_and_settles_and_whatever_is_refused_writes_nothing(
    transactional_db, case
):
    """The properties, on each driver in turn, and the same answer from both (SPEC DRV-04)."""
    with override_settings(XJOBS=XJOBS):
        try:
            answers = {kind: verdict(kind, case) for kind in ("memory", "postgres")}
            note(f"answers: {answers}")
            event(f"{'staged' if case.staged else 'direct'}: {answers['postgres'][0]}")
            assert answers["memory"] == answers["postgres"], f"the drivers disagree: {answers}"
        except Exception:
            note(f"seen: {case.seen}")
            raise


# --- limit-key templates (issue 40) -----------------------------------------------------------
# A limit key is rendered from the inputs at enqueue and again at the publish: the two must
# agree, and neither may raise anything but the coded refusal. A template is declared over the
# inputs ``a`` and ``b``; what it reaches for (an item, an attribute, a format) may not be there.


@job(
    name="test_property.limited",
    idempotency_key="limited:{n}",
    queue="prop.limited",
    limit_key="{a}",
    concurrency=50,
)
def limited(ctx, n: int = 0, a=None, b=None):
    return n


FIELDS = st.builds(
    lambda root, access, conversion, spec: "{" + root + access + conversion + spec + "}",
    st.sampled_from(["a", "b"]),
    st.sampled_from(["", "", "[id]", "[0]", "[0][id]", ".real", "[x]"]),
    st.sampled_from(["", "", "!r", "!s", "!a"]),
    st.sampled_from(["", "", ":05d", ":>8", ":.2f", ":x", ":,", ":%", ":c", ":s", ":1100"]),
)
LITERALS = st.text(st.characters(codec="utf-8", exclude_characters="{}\x00"), max_size=8)
TEMPLATES = (
    st.lists(st.one_of(FIELDS, FIELDS, LITERALS), min_size=1, max_size=4).map("".join).filter(bool)
)
TEMPLATE_INPUTS = st.one_of(
    PLAIN_JSON,
    st.integers(-(2**40), 2**40),
    st.integers(0xD800, 0xDFFF),  # a lone surrogate through ":c"
    st.integers(0x110000, 0x200000),  # past the last code point: OverflowError through ":c"
    st.builds(lambda v: {"id": v}, PLAIN_SCALARS),
    st.builds(lambda v: [{"id": v}], PLAIN_SCALARS),
    st.text(PLAIN_CHAR, min_size=1000, max_size=1100),
)


def stored_limit_key(driver, job_id) -> str | None:
    if isinstance(driver, MemoryDriver):
        return driver._limit_keys.get(job_id)
    with connection.cursor() as cursor:
        cursor.execute("SELECT limit_key FROM x_jobs WHERE id = %s", [job_id])
        return cursor.fetchone()[0]


def past_the_checks(inputs: dict[str, Any], n: int) -> EnqueueRequest:
    """The request another version (or SQL) could have staged with these inputs."""
    import json

    payload = {**inputs, "n": n}
    return EnqueueRequest(
        name=limited.name,
        queue="default",
        input=payload,
        input_json=json.dumps(payload),
        idempotency_key=f"limited:{n}",
        max_attempts=3,
    )


def key_verdict(kind: str, inputs: dict[str, Any]) -> tuple[str, str | None]:
    driver = fresh(kind)
    install(driver)
    try:
        refused: XJobsError | None = None
        with transaction.atomic():
            try:
                accepted = limited.enqueue(n=1, **inputs)
            except XJobsError as error:
                refused = error
            beside = neighbour.enqueue(n=1)
        relay_staged(driver)
        assert driver.reads().get_job(beside.id) is not None, "a neighbour was held back"
        if refused is not None:
            assert isinstance(refused, InputInvalidError), refused
            assert refused.meta.get("field") == "limit_key", refused
            answer: tuple[str, str | None] = ("refused", None)
        else:
            key = stored_limit_key(driver, accepted.id)
            assert key is not None and key.startswith(limited.name + SEPARATOR), key
            answer = ("accepted", key)
        # the same inputs staged past the enqueue's checks, a neighbour right behind: one pass
        # publishes the neighbour whatever becomes of the row, and decides the row as the
        # enqueue did (published with the same key, or quarantined)
        store = driver.outbox("default")
        row_id = store.stage(past_the_checks(inputs, 2))
        behind = store.stage(neighbour.build_request({"n": 2}))
        rows = store.claim(10, "prop-relay")
        published = publish_batch(store, driver, rows, "prop-relay")
        assert driver.reads().get_job(behind) is not None, "the row behind it was held back"
        if refused is not None:
            assert published == 1 and store.quarantine.count() == 1
            assert driver.reads().get_job(row_id) is None
        else:
            assert published == 2 and store.quarantine.count() == 0
            assert stored_limit_key(driver, row_id) == answer[1]
        return answer
    finally:
        uninstall(driver)


@settings(settings.get_profile(PROFILE))
@given(template=TEMPLATES, a=TEMPLATE_INPUTS, b=TEMPLATE_INPUTS)
def test_limit_19_a_limit_key_is_decided_alike_at_enqueue_and_at_publish(
    transactional_db, template, a, b
):
    """SPEC LIMIT-19, OUTBOX-21: any template over the inputs, any inputs: the enqueue refuses
    with ``X_INPUT_INVALID`` naming ``limit_key`` and writes nothing, or accepts and the key is
    stored; the same row staged past the checks is quarantined or published with that key, and
    the row behind it publishes in the same pass; both drivers answer alike."""
    declared = limited.limits
    limited.limits = JobLimits(
        key=check_template(template, limited.signature), concurrency=50, rate=None
    )
    try:
        with override_settings(XJOBS=XJOBS):
            inputs = {"a": a, "b": b}
            answers = {kind: key_verdict(kind, inputs) for kind in ("memory", "postgres")}
            note(f"answers: {answers}")
            event(answers["postgres"][0])
            assert answers["memory"] == answers["postgres"], f"the drivers disagree: {answers}"
    finally:
        limited.limits = declared
