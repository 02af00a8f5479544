"""How many claimed runs a worker keeps queued ahead of its threads.

Enough that a thread whose handler returns finds its next run waiting instead of waiting on a
claim round trip; no more, since a queued run is a job no other worker can take meanwhile. With
``"auto"`` the depth is what the threads get through in about two claim round trips, measured as
the worker runs: fast jobs get a deep queue (large claims, few round trips), slow jobs none.
"""

from __future__ import annotations

import math

#: the deepest queue "auto" keeps: past it a claim's own cost grows faster than it saves. The
#: threads wait on the GIL, not only on the claim, so the claim loop is often scheduled only once
#: the queue has run low: a queue this deep keeps them busy through that and the next claim
#: (W2 no-op drain, c=32: 64 gave ~6,800 jobs/s, 256 gave ~8,000-9,700)
AUTO_CAP = 256
#: how much each new measurement moves the running averages
_WEIGHT = 0.2


class Prefetch:
    """``ahead()`` runs may wait for a thread; claim again once ``low_water()`` or fewer do."""

    def __init__(self, setting: int | str, concurrency: int) -> None:
        self.fixed = None if setting == "auto" else int(setting)
        self.concurrency = concurrency
        #: running averages, in seconds, of a claim's round trip and a handler's run
        self.claim_time = 0.0
        self.run_time = math.inf  # nothing ran yet: queue nothing ahead until something has

    def ahead(self) -> int:
        if self.fixed is not None:
            return self.fixed
        # runs the threads finish during two claims, when every thread is busy
        through = 2 * self.concurrency * self.claim_time / max(self.run_time, 1e-6)
        return min(AUTO_CAP, math.ceil(through))

    def low_water(self) -> int:
        return self.ahead() // 2

    def claimed(self, seconds: float) -> None:
        if not self.claim_time:
            self.claim_time = seconds
        else:
            self.claim_time += (seconds - self.claim_time) * _WEIGHT

    def ran(self, seconds: float) -> None:
        """A handler took ``seconds`` (called from the job threads; a lost update is harmless)."""
        if math.isinf(self.run_time):
            self.run_time = seconds
        else:
            self.run_time += (seconds - self.run_time) * _WEIGHT
