"""What a run reads from the job it runs: one protocol that a declared job
(``definitions.JobHandle``) and a ``django.tasks`` task run through ``XJobsBackend``
(``backends.tasks.TaskJob``) both satisfy. The worker resolves a row's name to one at admission
and carries it on the run; nothing further down looks the name up again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..retry import Retry
    from .context import JobContext


class Runnable(Protocol):
    """A job as its runs see it: how to call it, and the policies a run obeys."""

    @property
    def name(self) -> str: ...

    @property
    def queue(self) -> str: ...

    @property
    def retry(self) -> Retry: ...

    #: seconds a body may run before it is told to stop (SPEC EXEC-04); None: no bound
    @property
    def timeout(self) -> float | None: ...

    @property
    def step_timeout(self) -> float | None: ...

    @property
    def event_poll(self) -> float | None: ...

    #: the fleet-wide cap on its runs at once (SPEC SLOT-02); None: no cap
    @property
    def concurrency(self) -> int | None: ...

    #: a run whose worker died runs again past its last attempt (a task) or not (a job)
    @property
    def reruns_lapsed(self) -> bool: ...

    @property
    def is_async(self) -> bool: ...

    #: the version of its code its runs start under (``@job(version=...)``); 1 for a task
    @property
    def version(self) -> int: ...

    #: what a run started under an older version does here: "replay", "restart" or "park"
    @property
    def old_runs(self) -> str: ...

    #: its result is sealed under XJOBS["ENCRYPTION_KEYS"] (``@job(encrypt=False)``: clear)
    @property
    def encrypt(self) -> bool: ...

    def invoke(self, ctx: JobContext, inputs: Mapping[str, object]) -> object:
        """Call the body for one run."""
