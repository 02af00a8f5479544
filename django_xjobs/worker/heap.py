"""The worker process's heap: what it holds at startup lives as long as the process."""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Collect once, then move every object left to the collector's permanent generation.

    A worker process imports Django, the project's apps and their jobs before its first claim:
    tens of thousands of objects that stay until it exits. Each full collection would walk all of
    them again, and the claim loop allocates enough per job to set one off every few thousand
    jobs (about a tenth of a second each, measured in bench/README.md). Frozen, they are skipped;
    what the jobs allocate is collected as before. Called once by ``xjobs_worker`` just before it
    starts working, never by the library on its own: in a host process (a test suite, a web
    server) the heap is the host's to manage.
    """
    gc.collect()
    gc.freeze()
