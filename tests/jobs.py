"""Module-level job fixtures every test reuses (autodiscovered: ``tests`` is an installed app)."""

from __future__ import annotations

import os
import time

from django_xjobs import Retry, TerminalError, job

from .models import Ledger

FAST = Retry(attempts=3, delay="10ms", max_delay="50ms", jitter=False)


@job(idempotency_key="ok:{n}", retry=FAST)
def ok(ctx, n: int = 0):
    return {"n": n, "attempt": ctx.attempt}


@job(idempotency_key="fails:{n}", retry=FAST)
def fails(ctx, n: int = 0):
    raise ValueError(f"boom {n}")


@job(idempotency_key="flaky:{n}", retry=FAST)
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
