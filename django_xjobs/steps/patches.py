"""``ctx.step.patched(name)``: one declaration that serves runs started before a change and
runs started after it (issue 44), as Temporal's patch markers do.

A run that reaches the patch fresh gets True and a marker among its steps (``patch:<name>``),
so every replay of it answers True again. A run whose stored history already went past this
point (it holds a step this attempt has not reached yet) gets False and no marker: it started
under the code without the patch, and keeps to it (docs/howto/changing-jobs.md).
"""

from __future__ import annotations

from ..errors import JobAbortedError, StepPatchError
from .record import StepRecorder

#: a patch's marker is a step of this name: a namespace of its own, so no step's name collides
PREFIX = "patch:"


class Patches(StepRecorder):
    """The patch markers of a run: part of ``Steps``."""

    def patched(self, name: str) -> bool:
        """True when this run reaches the change ``name`` fresh, False when it is an older run
        whose history went past this point without it (SPEC VER-10)::

            if ctx.step.patched("fraud-check"):
                ctx.step.run("fraud-check", lambda: fraud.check(order_id))

        Ask it once per run per name; the answer is the same at every replay of the run.
        """
        if not isinstance(name, str) or not name:
            raise StepPatchError(
                f"patch name {name!r} must be a non-empty string",
                hint='name the change it guards: ctx.step.patched("fraud-check")',
            )
        marker = PREFIX + name
        if self.ended:
            raise StepPatchError(
                f"ctx.step.patched({name!r}) was asked outside a running job: its attempt has ended"
            )
        if self.signal.is_set():  # stopped mid-run: the run's own ending says why
            raise JobAbortedError(f"patch {name!r} was not asked: the run was stopped")
        if marker in self._used:
            raise StepPatchError(f"patch {name!r} is asked twice in one run")
        self._claim_name(marker)
        record = self._records.get(marker)
        if record is not None and record.status == "completed":
            self._replayed.append(marker)
            return bool(record.output)
        if any(stored not in self._used for stored in self._records):
            # an older run: this point is not in its history, so it takes no place in it and
            # the steps after it keep their recorded positions
            self._position -= 1
            return False
        self.complete(marker, True)
        return True
