"""Module-level job fixtures every test reuses (autodiscovered: ``tests`` is an installed app)."""

from __future__ import annotations

import logging
import os
import threading
import time

from django_xjobs import (
    ChildJobFailedError,
    RateLimited,
    Retry,
    TerminalError,
    current_job,
    job,
)

from .models import Effect, Ledger

FAST = Retry(attempts=3, delay="10ms", max_delay="50ms", jitter=False)
#: a retry never due again inside the burst that made it, however slow the host: the tests move
#: time past it (``harness.advance(1)``) when they want the next attempt
ONE_SECOND = Retry(attempts=3, delay="1s", max_delay="1s", jitter=False)


@job(idempotency_key="ok:{n}", retry=FAST)
def ok(ctx, n: int = 0):
    return {"n": n, "attempt": ctx.attempt}


@job(idempotency_key="fails:{n}", retry=FAST)
def fails(ctx, n: int = 0):
    raise ValueError(f"boom {n}")


@job(idempotency_key="flaky:{n}", retry=ONE_SECOND)
def flaky(ctx, n: int = 0, failures: int = 1):
    if ctx.attempt <= failures:
        raise ConnectionError(f"attempt {ctx.attempt} failed")
    return {"attempt": ctx.attempt}


@job(idempotency_key="terminal:{n}", retry=Retry(attempts=5, delay="10ms", jitter=False))
def terminal(ctx, n: int = 0):
    raise TerminalError("the card was declined")


@job(idempotency_key="no-dead-letter:{n}", retry=Retry(attempts=1, dead_letter=False))
def no_dead_letter(ctx, n: int = 0):
    raise ValueError("dropped")


@job(idempotency_key="bad-result:{n}")
def bad_result(ctx, n: int = 0):
    return {"when": object()}


@job(idempotency_key="exits:{n}", retry=Retry(attempts=1))
def exits(ctx, n: int = 0):
    raise SystemExit(3)


@job(idempotency_key="async:{n}")
async def async_ok(ctx, n: int = 0):
    return {"n": n}


@job(idempotency_key="other:{n}", queue="other")
def on_other_queue(ctx, n: int = 0):
    return n


@job(idempotency_key="prio:{n}", priority=5)
def important(ctx, n: int = 0):
    return n


@job(idempotency_key=lambda **inputs: f"kw:{sorted(inputs.items())}")
def takes_kwargs(ctx, **inputs):
    return inputs


@job(idempotency_key="ledger:{token}", retry=Retry(attempts=5, delay="100ms", jitter=False))
def ledger(ctx, token: str, hold: float = 0.0, hold_attempts: int = 1, heed_signal: bool = True):
    """Record start and end in the ledger; hold (busy) on the first ``hold_attempts`` attempts."""
    Ledger.objects.create(token=token, phase="start", attempt=ctx.attempt, pid=os.getpid())
    if ctx.attempt <= hold_attempts and hold:
        if heed_signal:
            ctx.signal.wait(hold)
        else:
            deadline = time.monotonic() + hold
            while time.monotonic() < deadline:  # a body that ignores its signal
                time.sleep(0.05)
    Ledger.objects.create(token=token, phase="done", attempt=ctx.attempt, pid=os.getpid())
    return {"pid": os.getpid(), "attempt": ctx.attempt}


@job(idempotency_key="emails:{token}", queue="emails")
def emails_ledger(ctx, token: str, hold: float = 0.0):
    """The ledger job on queue ``emails``: a paused queue's runs are told apart from
    ``default``'s by the ledger, not by logs (CTRL-02)."""
    Ledger.objects.create(token=token, phase="start", attempt=ctx.attempt, pid=os.getpid())
    if hold:
        ctx.signal.wait(hold)
    Ledger.objects.create(token=token, phase="done", attempt=ctx.attempt, pid=os.getpid())


@job(idempotency_key="cut-short:{token}", retry=Retry(attempts=5, delay="100ms", jitter=False))
def cut_short(ctx, token: str, hold: float = 60.0):
    """Record start and end in the ledger; its first run (no start recorded before) holds until
    its signal is set, so an outage cuts it short, and honours it: a cut-short run records no
    end. The attempt it ends on is in the ledger (issue 25 item 1: the cut is not spent)."""
    first = not Ledger.objects.filter(token=token, phase="start").exists()
    Ledger.objects.create(token=token, phase="start", attempt=ctx.attempt, pid=os.getpid())
    if first:
        ctx.signal.wait(hold)
        ctx.signal.raise_if_set()
    Ledger.objects.create(token=token, phase="done", attempt=ctx.attempt, pid=os.getpid())
    return ctx.attempt


@job(idempotency_key="settles-late:{token}", retry=Retry(attempts=5, delay="100ms", jitter=False))
def settles_late(ctx, token: str, linger: float = 1.0):
    """Record done in the ledger, then linger before returning: the run's result reaches the
    settler ``linger`` seconds after its work is done (a window to cut the database in)."""
    Ledger.objects.create(token=token, phase="done", attempt=ctx.attempt, pid=os.getpid())
    ctx.signal.wait(linger)
    return {"attempt": ctx.attempt}


# --- steps (SPEC §4) --------------------------------------------------------------------------


def _mark(token: str, phase: str, attempt: int) -> int:
    Ledger.objects.create(token=token, phase=phase, attempt=attempt, pid=os.getpid())
    return attempt


@job(idempotency_key="five:{token}", retry=Retry(attempts=3, delay="100ms", jitter=False))
def five_steps(ctx, token: str, hold: float = 0.0):
    """Five recorded steps; step 3 holds (busy) on the first attempt for ``hold`` seconds."""
    for i in range(1, 6):

        def body(i=i):
            _mark(token, f"step{i}", ctx.attempt)
            if i == 3 and ctx.attempt == 1 and hold:
                deadline = time.monotonic() + hold
                while time.monotonic() < deadline:
                    time.sleep(0.05)
            return i

        ctx.step.run(f"step{i}", body)
    return {"steps": 5}


@job(idempotency_key="fails-at-b:{token}", retry=FAST)
def fails_at_b(ctx, token: str):
    a = ctx.step.run("a", lambda: _mark(token, "a", ctx.attempt))
    b = ctx.step.run("b", lambda: _fail_first(token, ctx.attempt))
    c = ctx.step.run("c", lambda: _mark(token, "c", ctx.attempt))
    return [a, b, c]


def _fail_first(token: str, attempt: int) -> int:
    _mark(token, "b", attempt)
    if attempt == 1:
        raise ConnectionError("b failed")
    return attempt


@job(idempotency_key="reorders:{token}", retry=FAST)
def reorders(ctx, token: str, swap: bool = True):
    """Steps a and b, then the first attempt fails; with ``swap`` the retry reaches a and b the
    other way round, as after a deploy that reordered them."""
    order = ["b", "a"] if swap and ctx.attempt > 1 else ["a", "b"]
    done = [ctx.step.run(name, lambda name=name: _mark(token, name, ctx.attempt)) for name in order]
    if ctx.attempt == 1:
        raise ConnectionError("the first attempt fails after its steps")
    return done


@job(idempotency_key="sleeper:{n}")
def sleeper(ctx, n: int = 0, token: str = ""):
    ctx.step.run("before", lambda: _mark(token, "before", ctx.attempt) if token else 0)
    ctx.step.sleep("nap", "3d")
    ctx.step.run("after", lambda: _mark(token, "after", ctx.attempt) if token else 0)
    return {"slept": True}


@job(idempotency_key="sleep-loop:{n}")
def sleep_loop(ctx, n: int = 3):
    for _ in range(n):
        ctx.step.sleep("1h")
    return ctx.step.used_names


@job(idempotency_key="waiter:{order_id}:{tag}", event_poll="5s")
def waiter(ctx, order_id: int, tag: str = "", required: bool = False, timeout: str = "1d"):
    data = ctx.step.wait_for_event(
        "shipped", "order.shipped", match={"order_id": order_id}, timeout=timeout, required=required
    )
    return {"got": data}


@job(idempotency_key="waiter-default-poll:{order_id}")
def waiter_default_poll(ctx, order_id: int):
    return ctx.step.wait_for_event("shipped", "order.shipped", match={"order_id": order_id})


# --- events that start and cancel jobs (issue 43) --------------------------------------------


@job(idempotency_key="welcome:{user_id}", on_event="user.created")
def welcome(ctx, user_id: int, email: str = "", **_):
    """Started by each ``user.created`` event, its data as the inputs (the fields it does not
    name taken by ``**_``)."""
    return {"user_id": user_id, "email": email, "tenant": ctx.tenant_id}


@job(idempotency_key="plan:{plan}", on_event=["user.created", "user.upgraded"])
def start_plan(ctx, **data):
    """Its key names a field a ``user.created`` event may lack: that event refuses it."""
    return data


@job(idempotency_key=lambda user_id: f"farewell:{user_id}", on_event="user.deleted")
def farewell(ctx, user_id: int, **_):
    """Its key callable takes ``user_id`` alone: an event carrying more fields refuses it."""
    return {"user_id": user_id}


@job(
    idempotency_key="resync:{account_id}",
    on_event="account.changed",
    cancel_on={"account.changed": ["account_id"]},
)
def resync(ctx, account_id: int, **_):
    """Each ``account.changed`` event of an account restarts it: the live run cancelled, a new
    one started."""
    return {"account_id": account_id}


@job(idempotency_key="fulfil:{order_id}", retry=FAST, cancel_on={"order.cancelled": ["order_id"]})
def fulfil(ctx, order_id: int, token: str = "", hold: float = 0.0):
    """Cancelled by an ``order.cancelled`` event of its order; with ``hold``, it marks the ledger
    where it waits for its stop signal, then tries one more step."""
    if hold:
        _mark(token, "waiting", ctx.attempt)
        ctx.signal.wait(hold)
        ctx.step.run("after", lambda: _mark(token, "after", ctx.attempt))
    return {"order_id": order_id}


@job(idempotency_key="dup-steps:{n}", retry=Retry(attempts=5))
def dup_steps(ctx, n: int = 0):
    ctx.step.run("x", lambda: 1)
    ctx.step.run("x", lambda: 2)


@job(idempotency_key="bad-step-output:{n}", retry=FAST)
def bad_step_output(ctx, n: int = 0):
    ctx.step.run("x", lambda: {"when": object()})


@job(idempotency_key="step-timeout:{n}", step_timeout="200ms", retry=FAST)
def slow_step(ctx, n: int = 0):
    def waits(signal):
        signal.wait(10)  # returns as soon as the step deadline aborts the signal
        return "late"

    return ctx.step.run("slow", waits)


@job(idempotency_key="timeout:{token}", timeout="300ms", retry=Retry(attempts=1))
def overruns(ctx, token: str, late_step: bool = True):
    """Ignores its signal: busy for 1 s, then tries to record a step (or just returns)."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        time.sleep(0.02)
    if late_step:
        ctx.step.run("late", lambda: _mark(token, "late", ctx.attempt))
    return "finished late"


@job(idempotency_key="async-steps:{n}")
async def async_steps(ctx, n: int = 0):
    first = await ctx.step.run("first", lambda: n + 1)
    await ctx.step.sleep("nap", "1h")
    return {"first": first}


@job(idempotency_key="waits-forever:{token}", retry=FAST)
def step_then_wait(ctx, token: str):
    ctx.step.run("one", lambda: _mark(token, "one", ctx.attempt))
    _mark(token, "waiting", ctx.attempt)  # every attempt, outside a step: the body reached its wait
    ctx.signal.wait(30)
    ctx.step.run("two", lambda: _mark(token, "two", ctx.attempt))


# --- failure semantics (SPEC §5, §7, §8) -----------------------------------------------------


@job(idempotency_key="exclusive:{token}", concurrency=1, retry=Retry(attempts=5, delay="100ms"))
def exclusive(
    ctx, token: str, hold: float = 0.3, kill_first: bool = False, rerun_gated: bool = False
):
    """At most one run fleet-wide; records its start and end (the ledger proves no overlap).

    ``rerun_gated``: a re-run (attempt 2 on) also holds until the test writes a "release" row
    for ``token`` (at most a minute), so the test can judge what the first run did while the
    re-run still holds the row, however slow the host."""
    _mark(token, "start", ctx.attempt)
    deadline = time.monotonic() + hold
    while time.monotonic() < deadline:
        time.sleep(0.02)
    if rerun_gated and ctx.attempt > 1:
        gate = time.monotonic() + 60
        released = Ledger.objects.filter(token=token, phase="release")
        while not released.exists() and time.monotonic() < gate:
            time.sleep(0.02)
    _mark(token, "end", ctx.attempt)
    return ctx.attempt


@job(idempotency_key="kills-worker:{n}", retry=Retry(attempts=10, delay="50ms"))
def kills_its_worker(ctx, n: int = 0):
    """A poison job: every run takes its worker process down."""
    os.kill(os.getpid(), 9)


@job(idempotency_key="kills-process:{token}", retry=Retry(attempts=10, delay="50ms"))
def kills_its_process(ctx, token: str, after: list[str] | None = None):
    """A poison job (issue 39): each run records its start and its process, waits until every
    job of ``after`` has started (at most a minute: they are in flight beside it), then SIGKILLs
    the process it runs in, a worker's or the child that isolates it."""
    _mark(token, "start", ctx.attempt)
    deadline = time.monotonic() + 60
    while after and time.monotonic() < deadline:
        started = set(
            Ledger.objects.filter(token__in=after, phase="start").values_list("token", flat=True)
        )
        if started >= set(after):
            break
        time.sleep(0.05)
    os.kill(os.getpid(), 9)


@job(idempotency_key="gated:{token}", retry=Retry(attempts=5, delay="100ms", jitter=False))
def gated(ctx, token: str):
    """Records its start and its process, then holds, deaf to its signal, until the test writes
    a "release" row for ``token`` (at most two minutes), and records its end: a run that outlives
    whatever drain or lease the test needs it to (issue 39)."""
    _mark(token, "start", ctx.attempt)
    deadline = time.monotonic() + 120
    released = Ledger.objects.filter(token=token, phase="release")
    while time.monotonic() < deadline and not released.exists():
        time.sleep(0.05)
    _mark(token, "done", ctx.attempt)
    return ctx.attempt


@job(idempotency_key="into-outage:{token}", retry=Retry(attempts=5, delay="100ms", jitter=False))
def runs_into_outage(ctx, token: str):
    """Records its start in the jobs database. Its first run then holds, deaf to its signal,
    until that database stops answering, and on until its worker gives it up at its lease's
    local deadline (issue 39 item 1): an outage cuts it short. Every later run records its end
    at once."""
    from django.db import DatabaseError, connection

    _mark(token, "start", ctx.attempt)
    if Ledger.objects.filter(token=token, phase="start").count() == 1:
        while True:
            try:
                Ledger.objects.filter(token=token, phase="done").exists()
            except DatabaseError:
                connection.close()
                break
            time.sleep(0.05)
        while not ctx.signal.is_set():  # reads the local deadline itself (SPEC LEASE-15)
            time.sleep(0.05)
        ctx.signal.raise_if_set()
    _mark(token, "done", ctx.attempt)
    return ctx.attempt


# --- a body that outlives its timeout (SPEC EXEC-05, issue 11 item 2) ------------------------

_live_lock = threading.Lock()
#: bodies of ``overrun_busy`` running now in this process, and the most seen at once
live_bodies = {"now": 0, "max": 0}


@job(
    idempotency_key="overrun-capped:{token}",
    concurrency=1,
    timeout="300ms",
    retry=Retry(attempts=3, delay="10ms", jitter=False),
)
def overrun_capped(ctx, token: str, hold: float = 1.0):
    """concurrency=1; its first attempt ignores its signal and stays busy ``hold`` s, well past
    its timeout. Start and end in the ledger prove whether a retry overlapped it."""
    _mark(token, "start", ctx.attempt)
    if ctx.attempt == 1:
        _busy(hold)
    _mark(token, "end", ctx.attempt)
    return ctx.attempt


@job(idempotency_key="overrun-busy:{token}", timeout="300ms", retry=Retry(attempts=1))
def overrun_busy(ctx, token: str, hold: float = 1.0):
    """Ignores its signal, busy ``hold`` s past a 300 ms timeout; counts the bodies live at once."""
    with _live_lock:
        live_bodies["now"] += 1
        live_bodies["max"] = max(live_bodies["max"], live_bodies["now"])
    try:
        _mark(token, "start", ctx.attempt)
        _busy(hold)
        _mark(token, "end", ctx.attempt)
    finally:
        with _live_lock:
            live_bodies["now"] -= 1


def _busy(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.02)


# --- faults (issue 12): a ledger that needs no database ---------------------------------------


@job(idempotency_key="file:{token}", retry=Retry(attempts=5, delay="100ms", jitter=False))
def file_ledger(ctx, token: str, path: str, hold: float = 0.0, hold_attempts: int = 1):
    """Record start and end in a file (its worker may be cut off from the database); hold on the
    first ``hold_attempts`` attempts, and on an aborted signal record "stopped" and stop."""
    _file_mark(path, token, "start", ctx.attempt)
    if ctx.attempt <= hold_attempts and hold and ctx.signal.wait(hold):
        _file_mark(path, token, "stopped", ctx.attempt)
        ctx.signal.raise_if_set()
    _file_mark(path, token, "end", ctx.attempt)
    return {"pid": os.getpid(), "attempt": ctx.attempt}


def _file_mark(path: str, token: str, phase: str, attempt: int) -> None:
    line = f"{token} {phase} {attempt} {os.getpid()} {time.time():.6f}\n"
    with open(path, "a") as ledger_file:  # one short append per line: whole lines interleave
        ledger_file.write(line)


# --- the ambient job and actors (issue 16) -------------------------------------------------------


@job(idempotency_key="ambient:{n}")
def ambient(ctx, n: int = 0):
    seen = current_job()
    logging.getLogger("tests.ambient").warning("inside the run")
    return {"same": seen is ctx, "name": seen.name if seen else None}


@job(idempotency_key="ambient-bounded:{n}", timeout="30s")
def ambient_bounded(ctx, n: int = 0):
    return {"same": current_job() is ctx}  # its body runs on a thread of its own


@job(idempotency_key="ambient-async:{n}")
async def ambient_async(ctx, n: int = 0):
    return {"same": current_job() is ctx}


@job(idempotency_key="parent:{n}", tenant=lambda n, **_: f"tenant-{n}")
def parent(ctx, n: int = 0):
    child = ok.enqueue(n=n + 1_000_000)
    return {"child": str(child.id)}


@job(idempotency_key="scoped:{n}", tenant="required")
def scoped(ctx, n: int = 0):
    return {"tenant": ctx.tenant_id, "by": ctx.enqueued_by}


@job(idempotency_key="child-square:{n}")
def child_square(ctx, n: int, fail: bool = False):
    Ledger.objects.create(token=f"child:{n}", phase="ran", attempt=ctx.attempt, pid=os.getpid())
    if fail:
        raise TerminalError(f"child {n} refused")
    return {"square": n * n}


@job(idempotency_key="parent-calls:{tag}", event_poll="5s")
def parent_calls(ctx, tag: str, ns: list, fail: list | None = None):
    """Fans out one child per ``ns`` and returns their results, or the failure it caught."""
    inputs = [{"n": n, "fail": n in (fail or [])} for n in ns]
    try:
        results = ctx.step.call_many(child_square, inputs)
    except ChildJobFailedError as error:
        return {"caught": error.code, "children": error.children, "child_id": error.child_id}
    Ledger.objects.create(token=tag, phase="resumed", attempt=ctx.attempt, pid=os.getpid())
    return {"results": results}


@job(idempotency_key="nested-call:{tag}:{level}", event_poll="5s")
def nested_call(ctx, tag: str, level: int):
    """Calls its own job as a child: one generation a run, with no end of its own (SPEC
    CHILD-09 ends it at ``MAX_CHILD_DEPTH``)."""
    Ledger.objects.create(token=f"{tag}-{level}", phase="ran", attempt=ctx.attempt, pid=os.getpid())
    return {"level": level, "below": ctx.step.call(nested_call, {"tag": tag, "level": level + 1})}


@job(
    idempotency_key="refundable-parent:{order_id}",
    event_poll="5s",
    cancel_on={"order.refunded": ["order_id"]},
)
def refundable_parent(ctx, order_id: int, ns: list):
    """Fans out one child per ``ns``; an ``order.refunded`` event of its order cancels it, and
    its live children with it (SPEC CANCEL-07)."""
    return {"results": ctx.step.call_many(child_square, [{"n": n} for n in ns])}


@job(idempotency_key="patient-parent:{tag}", event_poll="1h")
def patient_parent(ctx, tag: str, ns: list, fail: list | None = None):
    """``parent_calls`` with a look at its children only once an hour: only the wake-up by the
    settle of its last child can make it due sooner (SPEC CHILD-07)."""
    inputs = [{"n": n, "fail": n in (fail or [])} for n in ns]
    try:
        return {"results": ctx.step.call_many(child_square, inputs)}
    except ChildJobFailedError as error:
        return {"caught": error.code}


@job(idempotency_key="parent-call:{n}", event_poll="5s")
def parent_call(ctx, n: int, fail: bool = False):
    one = ctx.step.call(child_square, {"n": n, "fail": fail})
    two = ctx.step.call(child_square, {"n": n + 1})
    return {"one": one, "two": two}


@job(idempotency_key="async-parent-call:{n}", event_poll="5s")
async def async_parent_call(ctx, n: int):
    return {"many": await ctx.step.call_many(child_square, [{"n": n}, {"n": n + 1}])}


#: the workflow chaos kills the oldest worker that ran work every few seconds, and each run a
#: kill cuts short lapses and counts its attempt (SPEC T4): a suspect's next run starts in a
#: child process (a fresh interpreter: seconds on a loaded host, SPEC LEASE-19), a window the
#: next kill may land in again. The test is about children enqueued once and parents resumed,
#: not the attempts budget, so its jobs outlast any run of kills it makes
CHAOS_RETRY = Retry(attempts=50, delay="100ms", max_delay="1s", jitter=False)


@job(idempotency_key="chaos-child:{token}:{i}", retry=CHAOS_RETRY)
def chaos_child(ctx, token: str, i: int):
    Ledger.objects.create(token=f"{token}-c{i}", phase="ran", attempt=ctx.attempt, pid=os.getpid())
    time.sleep(0.2)  # long enough for a kill to land mid-run now and then
    return {"token": token, "i": i}


@job(idempotency_key="chained:{token}:{link}", retry=Retry(attempts=5, delay="100ms", jitter=False))
def chained(ctx, token: str, link: int, fail: bool = False):
    """One link of a chain of dependants (issue 32): the ledger says when each run began."""
    Ledger.objects.create(
        token=f"{token}-{link}", phase="ran", attempt=ctx.attempt, pid=os.getpid()
    )
    time.sleep(0.2)  # long enough for a kill to land mid-run now and then
    if fail:
        raise TerminalError(f"link {link} of {token} refused")
    return {"link": link}


@job(idempotency_key="chaos-parent:{token}", event_poll="1s", retry=CHAOS_RETRY)
def chaos_parent(ctx, token: str):
    Ledger.objects.create(token=token, phase="parent", attempt=ctx.attempt, pid=os.getpid())
    results = ctx.step.call_many(chaos_child, [{"token": token, "i": i} for i in range(3)])
    Ledger.objects.create(token=token, phase="resumed", attempt=ctx.attempt, pid=os.getpid())
    return {"results": results}


@job(idempotency_key="event-waiter:{token}", event_poll="1h", retry=CHAOS_RETRY)
def event_waiter(ctx, token: str):
    """Waits for its own ``waiter.released`` event (issue 43). It looks only once an hour, so
    it resumes at once only when the publish releases it; what it got is recorded once, in an
    atomic step (the ledger row commits with the step's record)."""
    Ledger.objects.create(token=token, phase="reached", attempt=ctx.attempt, pid=os.getpid())
    data = ctx.step.wait_for_event("released", "waiter.released", match={"token": token})
    time.sleep(0.1)  # long enough for a kill to land mid-run now and then
    with ctx.step.atomic("resumed"):
        Ledger.objects.create(
            token=f"{token}:{data['value']}", phase="resumed", attempt=ctx.attempt, pid=os.getpid()
        )
    return data


# crons live in jobs.py in an app; the fixtures are kept apart and registered from here
from tests import backfills, crons  # noqa: E402, F401


def _effect(ctx, step: str) -> None:
    Effect.objects.create(job_id=ctx.job_id, step=step, attempt=ctx.attempt, pid=os.getpid())


@job(idempotency_key="atomic:{token}", retry=Retry(attempts=10, delay="10ms", jitter=False))
def atomic_effects(ctx, token: str, steps: int = 2, fail_after: int = 0, hold: float = 0.0):
    """Each step writes one ``Effect`` row inside ``ctx.step.atomic``; the first attempt fails
    after ``fail_after`` steps; ``hold`` keeps each block open that long before it commits."""
    results = []
    for n in range(steps):
        with ctx.step.atomic(f"effect:{n}") as step:
            _effect(ctx, f"effect:{n}")
            if hold:
                ctx.signal.wait(hold)  # a slow block: a frozen or killed worker lands in it
            step.result = {"n": n, "attempt": ctx.attempt}
        results.append(step.result)
        if ctx.attempt == 1 and n + 1 == fail_after:
            raise RuntimeError(f"fails after step {n}")
    return results


@job(idempotency_key="atomic-async:{token}", retry=FAST)
async def atomic_effects_async(
    ctx, token: str, fail_after: bool = False, fail_in_block: bool = False
):
    """The async forms: ``async with`` and ``await ctx.step.atomic(name, fn)``."""
    async with ctx.step.atomic("effect:0") as step:
        await Effect.objects.acreate(job_id=ctx.job_id, step="effect:0", attempt=ctx.attempt, pid=0)
        if ctx.attempt == 1 and fail_in_block:
            raise RuntimeError("fails inside the block, after its write")
        step.result = {"attempt": ctx.attempt}
    second = await ctx.step.atomic("effect:1", lambda: _effect(ctx, "effect:1") or ctx.attempt)
    if ctx.attempt == 1 and fail_after:
        raise RuntimeError("fails after its atomic steps")
    return [step.result, second]


@job(idempotency_key="atomic-elsewhere:{n}", retry=FAST)
def atomic_elsewhere(ctx, n: int = 0):
    """Writes to the ``orders`` database inside an atomic step: refused, terminal."""
    with ctx.step.atomic("elsewhere"):
        Ledger.objects.using("orders").create(token=str(ctx.job_id), phase="x", attempt=1, pid=0)


@job(idempotency_key="{key}", retry=FAST)
def keyed(ctx, key: str = "k"):
    """Its key is its input: the key-size limits (issue 24) are met or broken on purpose."""
    return len(key)


@job(idempotency_key="secret-echo:{user}", retry=Retry(attempts=2, delay="10ms", jitter=False))
def secret_echo(ctx, user: str, password: str, note: str = "", fail: bool = True):
    """A handler that echoes its secret input into a step output and into its error (issue 26):
    nothing the library stores, logs or traces may carry the password afterwards."""
    ctx.step.run("login", lambda: {"user": user, "password": password, "note": note})
    if fail:
        logging.getLogger("tests.secret_echo").debug("logging in %s", user)
        raise ValueError(f"login failed for {user} with {password}")
    return {"user": user, "session_token": password, "note": note}


@job(idempotency_key="secret-step:{user}", retry=Retry(attempts=1))
def secret_step(ctx, user: str, password: str):
    """A step that fails echoing its secret (issue 26): the step's stored error is scrubbed too."""

    def login():
        raise ValueError(f"step login failed for {user} with {password}")

    ctx.step.run("login", login)


@job(idempotency_key="tenant-waiter:{order_id}:{any_tenant}", event_poll="5s")
def tenant_waiter(ctx, order_id: int, any_tenant: bool = False):
    """Waits for ``order.shipped`` of its order: of its own tenant, or of any (issue 26)."""
    data = ctx.step.wait_for_event(
        "shipped", "order.shipped", match={"order_id": order_id}, any_tenant=any_tenant
    )
    return {"got": data}


@job(idempotency_key="publisher:{order_id}")
def publisher(ctx, order_id: int):
    """Publishes from inside a run: the event takes the run's tenant."""
    from django_xjobs import publish_event

    publish_event("order.shipped", {"order_id": order_id, "from": ctx.tenant_id})


@job(idempotency_key="timed-steps:{token}", retry=FAST)
def timed_steps(ctx, token: str, hold: float = 0.3, fail_first: bool = False):
    """One step whose body takes ``hold`` seconds (busy, as real work is), then a quick one;
    with ``fail_first`` the slow step fails on the first attempt."""

    def slow():
        time.sleep(hold)  # the step's own work, not a wait for another part
        if fail_first and ctx.attempt == 1:
            raise RuntimeError("slow step failed")
        return "slow"

    return [ctx.step.run("slow", slow), ctx.step.run("quick", lambda: "quick")]


#: errors whose text PostgreSQL cannot store as it is, or that are far too long to (issue 24)
UNSTORABLE = {
    "nul": lambda: ValueError("bad \x00 byte"),
    "surrogate": lambda: ValueError("half an emoji: " + "\ud83d"),
    "huge": lambda: ValueError("x" * 100_000),
    "terminal-nul": lambda: TerminalError("declined \x00 for good"),
}


@job(idempotency_key="unstorable:{kind}", retry=ONE_SECOND)
def unstorable_error(ctx, kind: str):
    raise UNSTORABLE[kind]()


@job(idempotency_key="unstorable-step:{kind}", retry=Retry(attempts=1))
def unstorable_step_error(ctx, kind: str):
    ctx.step.run("fails", lambda: (_ for _ in ()).throw(UNSTORABLE[kind]()))


@job(idempotency_key="many-steps:{n}", retry=Retry(attempts=1))
def many_steps(ctx, n: int):
    for i in range(n):
        ctx.step.run(f"s{i}", lambda i=i: i)
    return {"steps": n}


@job(idempotency_key="bad-step-name", retry=Retry(attempts=1))
def bad_step_name(ctx):
    ctx.step.run("step\x00", lambda: 1)


# --- job controls (issue 29) ------------------------------------------------------------------


@job(idempotency_key="expiring:{token}", expires_in="10m")
def expiring(ctx, token: str):
    """Write the ledger when it runs: an expired job must leave no row there."""
    Ledger.objects.create(token=token, phase="run", attempt=ctx.attempt, pid=os.getpid())


@job(idempotency_key="snoozer:{token}", retry=FAST)
def snoozer(ctx, token: str, times: int = 1, seconds: float = 30.0):
    """Snooze ``times`` times (each one in the ledger), then finish."""
    if Ledger.objects.filter(token=token, phase="snooze").count() < times:
        Ledger.objects.create(token=token, phase="snooze", attempt=ctx.attempt, pid=os.getpid())
        ctx.snooze(seconds)
    Ledger.objects.create(token=token, phase="done", attempt=ctx.attempt, pid=os.getpid())
    return ctx.attempt


@job(idempotency_key="async-snoozer:{n}")
async def async_snoozer(ctx, n: int = 0):
    """Always snoozes, from an ``async def`` body."""
    await ctx.aprogress(1, total=2, note="half")
    await ctx.asnooze("1m")


@job(idempotency_key="progress:{token}")
def reports_progress(ctx, token: str, items: int = 1000):
    """Report progress on every item of a tight loop."""
    for n in range(1, items + 1):
        ctx.progress(n, total=items, note="copying")
    return items


@job(idempotency_key="noted:{n}")
def noted(ctx, note: str, password: str = "", n: int = 0):
    """Report progress with ``note`` (which may quote the run's own secret input)."""
    ctx.progress(1, total=2, note=note)
    return n


@job(idempotency_key="debounced:{doc}", debounce="30s")
def debounced(ctx, doc: int, edit: int = 0):
    """Record which edit the one debounced run saw."""
    Ledger.objects.create(
        token=f"debounced:{doc}", phase=f"edit-{edit}", attempt=ctx.attempt, pid=0
    )


# --- fleet-wide limits decided in the claim (issue 31, SPEC LIMIT-10..16) --------------------
# On their own queue: a worker of "default" keeps the plain claim.


@job(
    idempotency_key="per-account:{account}:{n}",
    queue="limited",
    concurrency=1,
    limit_key="{account}",
    retry=Retry(attempts=3, delay="100ms", jitter=False),
)
def per_account(ctx, account: str, n: int = 0, hold: float = 0.0):
    """One run per account at once, fleet-wide; start and end in the ledger under the account."""
    Ledger.objects.create(token=f"acct:{account}", phase="start", attempt=n, pid=os.getpid())
    if hold:
        ctx.signal.wait(hold)
    Ledger.objects.create(token=f"acct:{account}", phase="done", attempt=n, pid=os.getpid())


@job(
    idempotency_key="token-call:{api_token}:{n}",
    queue="limited",
    concurrency=5,
    limit_key="{api_token}",
)
def token_call(ctx, api_token: str, n: int = 0):
    """Limited per API token: its keys are made from a secret input (issue 40)."""
    return n


@job(
    idempotency_key="sharded:{n}",
    queue="limited",
    concurrency=2,
    limit_key="shard-{account[id]}-{n:03d}",
)
def sharded(ctx, account=None, n=0):
    """A limit key that only renders from an account dict and an integer ``n``: a string for
    either cannot fill it (issue 40)."""
    return n


@job(
    idempotency_key="rated:{partner}:{n}",
    queue="limited",
    rate_limit="10/s",
    limit_key="{partner}",
)
def rated(ctx, partner: str, n: int = 0):
    """At most 10 starts a second per partner, fleet-wide; each start in the ledger."""
    Ledger.objects.create(token=f"rated:{partner}", phase="start", attempt=n, pid=os.getpid())


@job(idempotency_key="capped:{n}", queue="capped")
def capped(ctx, n: int = 0, hold: float = 0.0):
    """A job with no limit of its own, on a queue an operator caps at runtime."""
    Ledger.objects.create(token="capped", phase="start", attempt=n, pid=os.getpid())
    if hold:
        ctx.signal.wait(hold)
    Ledger.objects.create(token="capped", phase="done", attempt=n, pid=os.getpid())


@job(
    idempotency_key="slow-rate:{partner}:{n}",
    queue="rated",
    rate_limit="2/m",
    limit_key="{partner}",
)
def rated_slowly(ctx, partner: str, n: int = 0):
    """Two starts a minute per partner (issue 42: why names the spent budget and its next slot)."""


@job(
    idempotency_key="backs-off:{partner}:{n}",
    queue="limited",
    limit_key="{partner}",
    rate_limit="1000/s",
)
def backs_off(ctx, partner: str, n: int = 0, retry_after: str = ""):
    """Start in the ledger; with ``retry_after``, its first run raises RateLimited (recorded as
    phase "limited") and the runs after it end normally."""
    token = f"backoff:{partner}"
    Ledger.objects.create(token=token, phase="start", attempt=ctx.attempt, pid=os.getpid())
    first = not Ledger.objects.filter(token=token, phase="limited", attempt=n).exists()
    if retry_after and first:
        Ledger.objects.create(token=token, phase="limited", attempt=n, pid=os.getpid())
        raise RateLimited(retry_after=retry_after)


@job(idempotency_key="batch-report:{batch[id]}", retry=FAST)
def batch_report(ctx, batch: dict, tag: str = ""):
    """A batch's callback (issue 32): returns the counts it was given."""
    return {"tag": tag, **batch}


@job(idempotency_key="member:{token}", retry=Retry(attempts=3, delay="50ms", jitter=False))
def batch_member(ctx, token: str, fail_attempts: int = 0, die: bool = False, hold: float = 0.0):
    """A batch member under faults (issue 32): writes its every attempt's start and end to the
    ledger; fails its first ``fail_attempts`` attempts, or dies on its first (``die``)."""
    Ledger.objects.create(token=token, phase="start", attempt=ctx.attempt, pid=os.getpid())
    if hold:
        ctx.signal.wait(hold)
    Ledger.objects.create(token=token, phase="end", attempt=ctx.attempt, pid=os.getpid())
    if die:
        raise TerminalError("this member dies")
    if ctx.attempt <= fail_attempts:
        raise ConnectionError(f"attempt {ctx.attempt} fails")
    return {"attempt": ctx.attempt}


@job(idempotency_key="batch-done:{token}")
def batch_done(ctx, token: str, batch: dict):
    """A batch's callback under faults: its run, its job id and the counts it got, in the
    ledger."""
    phase = f"callback {ctx.job_id} {batch['done']} {batch['dead']} {batch['failed']}"
    Ledger.objects.create(token=token, phase=phase, attempt=ctx.attempt, pid=os.getpid())


@job(idempotency_key="numbers:{token}", retry=FAST)
def numbers(ctx, token: str, values: dict):
    """Stores ``values`` as a step's output and returns what the step gave back (SPEC DRV-05)."""
    return {"step": ctx.step.run("echo", lambda: values)}


@job(idempotency_key="timed-step-fails:{n}", timeout="30s", retry=Retry(attempts=1))
def timed_step_fails(ctx, n: int = 0):
    """A body with a timeout (so on a thread of its own) whose step raises."""

    def fails():
        raise ValueError(f"step {n} fails")

    ctx.step.run("fails", fails)


@job(idempotency_key="timed-reader:{token}", timeout="30s")
def timed_reader(ctx, token: str):
    """A body with a timeout that reads and writes the jobs database: its ledger rows."""
    Ledger.objects.create(token=token, phase="body", attempt=ctx.attempt, pid=os.getpid())
    return sorted(Ledger.objects.filter(token=token).values_list("phase", flat=True))


@job(idempotency_key="context:{n}", queue="other", retry=Retry(attempts=4))
def describes_its_context(ctx, n: int = 0):
    """What its ``JobContext`` holds, every field (SPEC EXEC-08)."""
    return {
        "job_id": str(ctx.job_id),
        "run_id": str(ctx.run_id),
        "name": ctx.name,
        "queue": ctx.queue,
        "attempt": ctx.attempt,
        "max_attempts": ctx.max_attempts,
        "inputs": dict(ctx.inputs),
        "tenant_id": ctx.tenant_id,
        "enqueued_by": ctx.enqueued_by,
        "signal_set": ctx.signal.is_set(),
        "step": callable(ctx.step.run),
        "logger": callable(ctx.logger.info),
    }


@job(idempotency_key="where:{n}")
def where_it_runs(ctx, n: int = 0):
    """The thread and the database session a sync body runs on (SPEC Q-12)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        [(backend,)] = cursor.fetchall()
    return {"thread": threading.current_thread().name, "backend": backend}


@job(idempotency_key="where-async:{n}")
async def where_it_runs_async(ctx, n: int = 0):
    """Whether an ``async def`` body runs on an event loop (SPEC Q-12)."""
    import asyncio

    return {"loop": asyncio.get_running_loop().is_running()}


# jobs declared at a version of their code (issue 44): discovered with these
from . import versioned  # noqa: E402, F401


@job(idempotency_key="sealed:{token}", retry=FAST)
def sealed(ctx, token: str, email: str):
    """Issue 46: a step's output replayed from storage after the next step fails once; under
    XJOBS["ENCRYPTION_KEYS"] its input, the step output and its result are stored encrypted."""
    found = ctx.step.run("lookup", lambda: {"email": email, "attempt": ctx.attempt})
    ctx.step.run("send", lambda: _fail_first(token, ctx.attempt))
    return {"sent_to": found["email"], "looked_up_on": found["attempt"]}


@job(idempotency_key="clear:{token}", encrypt=False)
def clear_input(ctx, token: str):
    """Issue 46: a job that keeps its input and result in clear, so filters can look inside."""
    return {"token": token}


@job(
    idempotency_key="unsub:{account_id}",
    encrypt=False,
    cancel_on={"account.closed": ["account_id"]},
)
def unsubscribe(ctx, account_id: int):
    """Issue 46: cancelled by an ``account.closed`` event of its account; its input is clear, so
    ``cancel_on`` can compare it under XJOBS["ENCRYPTION_KEYS"] while the event is encrypted."""
    return {"account_id": account_id}
