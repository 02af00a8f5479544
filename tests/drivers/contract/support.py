"""The contract suite's shared helpers: a request as the enqueue builds it, and a claim with the
worker's defaults (the claim's lease ``VIS`` seconds, the lapsed-lease sweep on). Test modules
elsewhere build their rows with them too."""

from __future__ import annotations

import json

from django_xjobs.drivers.contract import EnqueueRequest

VIS = 30.0


def request(name="tests.jobs.ok", key="k", queue="default", tenant=None, delay=None, priority=0):
    payload = {"n": 1}
    return EnqueueRequest(
        name=name,
        queue=queue,
        input=payload,
        input_json=json.dumps(payload),
        idempotency_key=key,
        max_attempts=3,
        priority=priority,
        delay=delay,
        tenant_id=tenant,
    )


def claim(driver, limit=10, queues=("default",), worker="w1", vis=VIS, lapsed=True, limits=None):
    more = {} if limits is None else {"limits": limits}
    return driver.runs().claim(
        queues=list(queues),
        limit=limit,
        visibility_timeout=vis,
        worker_id=worker,
        lapsed=lapsed,
        **more,
    )
