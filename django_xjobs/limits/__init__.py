"""Limits, one module per layer they serve; this package imports nothing, so importing one of
them runs no other (tests/project/test_boundaries.py checks both).

- ``keys`` (base): what a job declares (``limit_key``, ``concurrency``, ``rate_limit``) and the
  key a run carries, rendered where the drivers write its row.
- ``claims`` (drivers): what a limited claim is told, and the rules both drivers decide it by.
- ``rate_limited`` (run): a partner's ``RateLimited`` pauses the run's key and hands it back.
- ``worker`` (roles): a worker's per-process ``Limiter``, and the ``LimitPlan`` its claims make.
- ``operator`` (operator): a queue's runtime cap and what each limit key uses now.

The stores that keep a key's state are the drivers' own (``drivers/{memory,postgres}/limits.py``);
``XJOBS["LIMITS"]`` is parsed in ``conf.limits``.
"""
