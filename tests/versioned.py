"""Jobs declared at a version of their code (issue 44), imported by ``tests/jobs.py`` so every
worker discovers them. ``XJOBS_TEST_JOB_VERSION`` (2 unless set) is the version they declare:
a process test starts two workers of two versions of the same code with it. Each writes its
steps to the ``Ledger``, the proof of which code ran what."""

from __future__ import annotations

import os

from django_xjobs import Retry, job

from .models import Ledger

VERSION = int(os.environ.get("XJOBS_TEST_JOB_VERSION", "2"))
FAST = Retry(attempts=3, delay="10ms", max_delay="50ms", jitter=False)


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
