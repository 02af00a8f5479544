"""The one job the chaos stream runs: it writes its start and its end to the ledger, and it
honours its signal, so a run that lost its lease records no end (a second end is a real second
completion, not a run that was told to stop and finished anyway)."""

from __future__ import annotations

import random
import time

from django_xjobs import Retry, job
from tests.jobs import _mark


# timeout: a body blocked on a connection that went silent is bounded only by its job's own
# timeout (on a real network tcp_user_timeout also breaks the connection; through a local
# proxy the kernel keeps acknowledging, so it never fires) -- as a production job should be
@job(idempotency_key="chaos-hung:{token}", retry=Retry(attempts=1), timeout="3s")
def hangs(ctx, token: str, hold: float = 600.0):
    """Ignores its signal: busy ``hold`` s past its 3 s timeout, holding its thread (SPEC
    EXEC-05) until its process ends. Its key is outside the stream's, so the tally skips it."""
    _mark(token, "start", ctx.attempt)
    deadline = time.monotonic() + hold
    while time.monotonic() < deadline:
        time.sleep(0.05)
    _mark(token, "done", ctx.attempt)


@job(
    idempotency_key="chaos:{token}",
    retry=Retry(attempts=5, delay="200ms", jitter=False),
    timeout="5s",
)
def stream(ctx, token: str, hold: float = 0.5):
    _mark(token, "start", ctx.attempt)
    ctx.signal.wait(hold)
    ctx.signal.raise_if_set()  # lease lost, cancelled or timed out: no end is recorded
    _mark(token, "done", ctx.attempt)
    return ctx.attempt


@job(idempotency_key="chaos-long:{token}", retry=Retry(attempts=3, delay="200ms", jitter=False))
def long(ctx, token: str, hold: float = 20.0):
    """Busy ``hold`` s, deaf to its signal, between its two ledger rows: the long run of the
    deploy and suspect scenarios (issue 39 item 2). Its key is outside the stream's, so the
    tally skips it."""
    _mark(token, "start", ctx.attempt)
    deadline = time.monotonic() + hold
    while time.monotonic() < deadline:
        time.sleep(0.05)
    _mark(token, "done", ctx.attempt)
    return ctx.attempt


# The drained backlog of the outage-drain scenario (issue 39 item 1): three kinds of handler, each
# writing its start and its end to the ledger in the jobs database, so a body in flight fails
# when the server goes. Their keys share the stream's prefix, so the tally counts them.
DRAIN_RETRY = Retry(attempts=5, delay="200ms", jitter=False)


@job(idempotency_key="chaos:{token}", retry=DRAIN_RETRY)
def noop(ctx, token: str):
    _mark(token, "start", ctx.attempt)
    _mark(token, "done", ctx.attempt)
    return ctx.attempt


@job(idempotency_key="chaos:{token}", retry=DRAIN_RETRY)
def sleepy(ctx, token: str, low: float = 0.2, high: float = 2.0):
    """Sleeps 0.2 to 2 s ignoring its signal, between its two ledger rows."""
    _mark(token, "start", ctx.attempt)
    time.sleep(random.uniform(low, high))
    _mark(token, "done", ctx.attempt)
    return ctx.attempt


@job(idempotency_key="chaos:{token}", retry=DRAIN_RETRY)
def stepped(ctx, token: str):
    """Three recorded steps between its two ledger rows."""
    _mark(token, "start", ctx.attempt)
    for i in range(3):
        ctx.step.run(f"s{i}", lambda i=i: i)
    _mark(token, "done", ctx.attempt)
    return ctx.attempt
