"""Jobs declared at a version of their code (issue 44), imported by ``tests/jobs.py`` so every
worker discovers them. ``XJOBS_TEST_JOB_VERSION`` (2 unless set) is the version they declare:
a process test starts two workers of two versions of the same code with it. Each writes its
steps to the ``Ledger``, the proof of which code ran what."""

from __future__ import annotations

import os
import time

from django_xjobs import Retry, job

from .models import Ledger

VERSION = int(os.environ.get("XJOBS_TEST_JOB_VERSION", "2"))
FAST = Retry(attempts=3, delay="10ms", max_delay="50ms", jitter=False)
#: a retry never due again inside the drain that made it, however slow the host (tests move
#: time past it when they want the next attempt)
ONE_SECOND = Retry(attempts=3, delay="1s", max_delay="1s", jitter=False)
#: what is deployed: whether the handler asks ``patched("fraud-check")`` (a test flips it, or a
#: worker is started with ``XJOBS_TEST_PATCH=0``, to run the code from before the patch)
DEPLOYED = {"patch": os.environ.get("XJOBS_TEST_PATCH", "1") == "1"}


def _mark(token: str, phase: str, attempt: int) -> str:
    Ledger.objects.create(token=token, phase=phase, attempt=attempt, pid=os.getpid())
    return phase


def _steps(ctx, token: str) -> dict[str, int]:
    ctx.step.run("before", lambda: _mark(token, "before", ctx.attempt))
    ctx.step.sleep("nap", "1h")
    ctx.step.run("after", lambda: _mark(token, f"after@v{VERSION}", ctx.attempt))
    return {"version": VERSION}


@job(idempotency_key="v-replay:{token}", version=VERSION, retry=FAST)
def replays(ctx, token: str):
    return _steps(ctx, token)


@job(idempotency_key="v-restart:{token}", version=VERSION, old_runs="restart", retry=FAST)
def restarts(ctx, token: str):
    return _steps(ctx, token)


@job(idempotency_key="v-park:{token}", version=VERSION, old_runs="park", retry=FAST)
def parks(ctx, token: str):
    return _steps(ctx, token)


@job(idempotency_key="v-patched:{token}", retry=ONE_SECOND)
def patched(ctx, token: str, fail_after: bool = False, hold: float = 0.0):
    """A step, a patch (a fraud check the code from before it lacks), a sleep and a step;
    ``fail_after``: the last step fails on the first attempt, so the run replays; ``hold``: the
    last step marks that it began, then holds that long on the first attempt (a test kills the
    worker meanwhile)."""
    ctx.step.run("before", lambda: _mark(token, "before", ctx.attempt))
    checked = DEPLOYED["patch"] and ctx.step.patched("fraud-check")
    if checked:
        ctx.step.run("fraud-check", lambda: _mark(token, "fraud-check", ctx.attempt))
    ctx.step.sleep("nap", "1h")

    def after() -> str:
        if fail_after and ctx.attempt == 1:
            raise ConnectionError("the last step fails once")
        if hold and ctx.attempt == 1:
            _mark(token, "after-began", ctx.attempt)
            time.sleep(hold)  # the worker is SIGKILLed meanwhile
        return _mark(token, "after", ctx.attempt)

    ctx.step.run("after", after)
    return {"checked": checked}


@job(idempotency_key="v-patched-async:{token}", retry=FAST)
async def patched_async(ctx, token: str):
    """``patched`` from an ``async def`` handler."""
    from asgiref.sync import sync_to_async

    await ctx.step.run("before", lambda: token)
    checked = DEPLOYED["patch"] and await ctx.step.patched("fraud-check")
    if checked:
        await ctx.step.run("fraud-check", sync_to_async(lambda: _mark(token, "fraud", 1)))
    await ctx.step.sleep("nap", "1h")
    return {"checked": checked}
