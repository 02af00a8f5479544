"""A throttled key's backlog costs a limited claim no more than an empty queue (issue 31,
SPEC LIMIT-12): counted in shared buffers (``EXPLAIN (ANALYZE, BUFFERS)``, hit + read), not in
time, so the check holds on a busy machine.

The claim-then-hand-back it replaces read a throttled row, claimed it and wrote it back on every
poll; here the key is found by one step of the limit index, seen spent on its own row, and left
there: no run of it is read. Measured at 10,000 runs and again at the issue's 100,000: the cost
does not grow with them (one more index level at most).
"""

from __future__ import annotations

import pytest
from django.db import connection

from django_xjobs.drivers.postgres.limits import LIMITS
from django_xjobs.limits.claims import ClaimLimits
from django_xjobs.limits.keys import SEPARATOR
from django_xjobs.limits.worker import declared_limits
from tests.support.plans import plan

BACKLOG = 10_000
KEY = f"tests.jobs.rated{SEPARATOR}busy"

FILL = """
INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                    state, priority, run_at, created_at, updated_at, limit_key)
SELECT gen_random_uuid(), 'tests.jobs.rated', 'limited',
       jsonb_build_object('partner', 'busy', 'n', g), 'rated:busy:' || %(first)s + g, gen_random_uuid(), 0,
       3, 'ready', 0, now() - interval '1 minute', now(), now(), %(key)s
FROM generate_series(1, %(count)s) AS g
"""


def poll_buffers() -> int:
    """Shared buffers one limited poll reads before it would take runs: the caps' locks and
    the keys' step (claim_limited runs only for keys left to take)."""
    named = ClaimLimits(jobs=declared_limits()[0]).params()
    queues = plan(
        LIMITS["limit_queues"],
        {"queues": ["limited"], "generic": False},
        generic=False,
        analyze=True,
        buffers=True,
    )
    params = {**named, "queue": "limited", "limit": 10, "after": "", "paused": []}
    keys = plan(LIMITS["limit_keys"], params, generic=False, analyze=True, buffers=True)
    tops = [queues, keys]
    if keys["Actual Rows"]:  # a key left to take: the claim statement runs too
        claim = {**named, "queues": ["limited"], "keys": [KEY], "plain_queues": [], "limit": 10}
        claim |= {"worker_id": "cost", "visibility_timeout": 30.0, "versions": "{}", "paused": []}
        tops.append(plan(LIMITS["claim_limited"], claim, generic=False, analyze=True, buffers=True))
    return sum(top["Shared Hit Blocks"] + top["Shared Read Blocks"] for top in tops)


@pytest.mark.django_db
def test_limit_12_a_throttled_backlog_costs_a_poll_what_an_empty_queue_does():
    poll_buffers()  # the catalogs and the key table warm, as on a running worker
    empty = poll_buffers()
    with connection.cursor() as cursor:
        cursor.execute(FILL, {"key": KEY, "count": BACKLOG, "first": 0})
        # ten starts, dated ahead so the one-second window stays spent however slow the
        # machine: 10/s is used up for every poll below
        cursor.execute(
            "INSERT INTO x_limit_keys (key, starts, updated_at) VALUES"
            " (%s, array_fill(now() + interval '1 hour', ARRAY[10]), now())",
            [KEY],
        )
        cursor.execute("ANALYZE x_jobs")
    poll_buffers()
    throttled = poll_buffers()
    print(f"buffers per poll: empty queue {empty}, {BACKLOG} runs of a spent key {throttled}")
    assert throttled <= 2 * empty + 8, (empty, throttled)
    # and it does not grow with the backlog: ten times the runs, one index level at most
    with connection.cursor() as cursor:
        cursor.execute(FILL, {"key": KEY, "count": 9 * BACKLOG, "first": BACKLOG})
        cursor.execute("ANALYZE x_jobs")
    poll_buffers()
    assert poll_buffers() <= throttled + 3


@pytest.mark.django_db
def test_limit_12_the_limited_claim_is_planned_once_per_session():
    """Planned afresh on every execution (PostgreSQL never settled on its generic plan), the
    limited claim statement cost more to plan than to run: about 5 ms a claim, the bulk of an
    idle worker's sweep. It runs on its generic plan, planned once per session."""
    from django_xjobs.drivers.postgres import PostgresDriver
    from tests import jobs

    driver = PostgresDriver("default")
    for n in range(7):  # a key with room for each claim below: every one of them runs
        jobs.per_account.enqueue(account=f"a{n}", n=n)
    limits = ClaimLimits(jobs=declared_limits()[0])
    for _ in range(7):  # past the five custom plans PostgreSQL tries first
        driver.runs().claim(
            queues=["limited"],
            limit=1,
            visibility_timeout=30.0,
            worker_id="cost",
            lapsed=False,
            limits=limits,
        )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE %s",
            ["%AS p(name, concurrency, rate, window_s)%"],
        )
        assert cursor.fetchall() == [(7, 0)]


@pytest.mark.django_db
def test_limit_12_the_limited_claim_is_never_jit_compiled():
    """Its estimates over a large backlog pass jit_above_cost: on a server built with LLVM
    (Debian's and Ubuntu's packages) every sweep over a throttled backlog of 100k runs compiled
    the statement, about 2.4 s of CPU for a claim that runs in a millisecond. The claim's
    transaction turns JIT off for itself (limits.sql limit_queues); the test's transaction is
    the claim's here, so the setting is still in force after it."""
    from django_xjobs.drivers.postgres import PostgresDriver
    from tests import jobs

    jobs.per_account.enqueue(account="jit", n=0)
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone() == ("on",)
        PostgresDriver("default").runs().claim(
            queues=["limited"],
            limit=1,
            visibility_timeout=30.0,
            worker_id="cost",
            lapsed=False,
            limits=ClaimLimits(jobs=declared_limits()[0]),
        )
        cursor.execute("SHOW jit")
        assert cursor.fetchone() == ("off",)


SPREAD = """
INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                    state, priority, run_at, created_at, updated_at, limit_key)
SELECT gen_random_uuid(), 'tests.jobs.per_account', 'limited',
       jsonb_build_object('account', %(prefix)s || g, 'n', n),
       'account:' || %(prefix)s || g || ':' || n, gen_random_uuid(), 0, 3, 'ready', 0,
       now() - interval '1 minute' + n * interval '1 second', now(), now(),
       'tests.jobs.per_account' || E'\\x1f' || %(prefix)s || g
FROM generate_series(1, %(keys)s) AS g, generate_series(0, 1) AS n
"""


def _nodes(node: dict):
    yield node
    for child in node.get("Plans", ()):
        yield from _nodes(child)


def keys_step(limit: int) -> tuple[int, int, int]:
    """limit_keys as a claim of ``limit`` sends it: (keys it locked, keys its walk read, shared
    buffers)."""
    named = ClaimLimits(jobs=declared_limits()[0]).params()
    params = {**named, "queue": "limited", "limit": limit, "after": "", "paused": []}
    top = plan(LIMITS["limit_keys"], params, generic=False, analyze=True, buffers=True)
    walked = sum(n["Actual Rows"] for n in _nodes(top) if n.get("Subplan Name") == "CTE walk")
    return top["Actual Rows"], walked, top["Shared Hit Blocks"] + top["Shared Read Blocks"]


# outside a transaction, so VACUUM can run: the other tests' rolled-back rows leave their
# index entries behind until a vacuum, and a walk stepping through them reads more buffers
# (a CI run in random order read 82 more, where the bound allows an index level's 16)
@pytest.mark.django_db(transaction=True)
def test_limit_11_a_claim_reads_the_keys_it_can_take_not_every_key_waiting(monkeypatch):
    """Issue 31's W2 over 1,000 keys: a claim of 16 walked, locked and counted all 1,000 keys
    with work waiting (about 70 ms a claim), so a limited drain ran at half the plain one's
    rate. It stops at the 16th key with room: what it reads is its limit's worth, not the
    keys'."""
    from django_xjobs.drivers.postgres import PostgresDriver
    from django_xjobs.drivers.postgres import limits as postgres_limits

    with connection.cursor() as cursor:
        cursor.execute(SPREAD, {"keys": 1000, "prefix": "k"})  # two runs a key
        cursor.execute("VACUUM ANALYZE x_jobs")
    locked, walked, _ = keys_step(16)
    assert (locked, walked) == (16, 16)
    # as the driver's claim sends it: 16 keys locked, 16 runs taken, one of each key
    sent: list[int] = []
    fetch = postgres_limits.sql.fetch

    def counting(using, text, params):
        rows = fetch(using, text, params)
        if text == LIMITS["limit_keys"]:
            sent.append(len(rows))
        return rows

    monkeypatch.setattr(postgres_limits.sql, "fetch", counting)
    taken = (
        PostgresDriver("default")
        .runs()
        .claim(
            queues=["limited"],
            limit=16,
            visibility_timeout=30.0,
            worker_id="cost",
            lapsed=False,
            limits=ClaimLimits(jobs=declared_limits()[0]),
        )
    )
    assert sent == [16]
    assert len({c.input["account"] for c in taken}) == 16
    # keys full to their concurrency are stepped over, not counted in the limit: the next 16
    monkeypatch.undo()
    locked, walked, buffers = keys_step(16)
    assert (locked, walked) == (16, 32)
    with connection.cursor() as cursor:
        cursor.execute(SPREAD, {"keys": 9000, "prefix": "more"})
        cursor.execute("VACUUM ANALYZE x_jobs")
    # ten times the keys waiting: the same walk, no more than an index level's reads more
    _, walked, more = keys_step(16)
    print("BUFFERS", buffers, more)
    assert walked == 32 and more <= buffers + 16, (buffers, more)
