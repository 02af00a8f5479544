"""The operator's view of the versions of live runs (issue 44): which job runs under which
version of its code, and what the workers of this code would do with each."""

from __future__ import annotations

from ..declarations import registry
from ..drivers import get_driver
from ..drivers.contract import VersionCount
from .answers import RunVersion


def inspect_versions() -> list[RunVersion]:
    """The live runs per job and version, each with what a worker of this code does with
    them (``fate``), by job name then version::

        >>> [(v.job, v.version, v.fate) for v in inspect_versions()]
        [('shop.jobs.fulfil', 1, 'park'), ('shop.jobs.fulfil', 2, 'current')]

    A run counts as ``running``, ``waiting`` (ready, delayed or suspended) or ``parked``
    (suspended by a worker of a newer version, ``old_runs="park"``).
    """
    return [_version(count) for count in get_driver().reads().live_versions()]


def deploy_blockers() -> list[RunVersion]:
    """The live runs a deploy of this code would leave parked or run by no worker of it (SPEC
    VER-13): a version this code parks (``old_runs="park"``) or is older than, a job it does
    not declare, and runs parked already. Empty: the deploy strands no live run::

        >>> [(v.job, v.version, v.fate) for v in deploy_blockers()]
        [('shop.jobs.fulfil', 1, 'park')]
    """
    return [found for found in inspect_versions() if found.blocks]


def _version(count: VersionCount) -> RunVersion:
    handle = registry.jobs.get(count.name)
    declared = None if handle is None else handle.version
    old_runs = None if handle is None else handle.old_runs
    return RunVersion(
        job=count.name,
        version=count.version,
        declared=declared,
        old_runs=old_runs,
        running=count.running,
        waiting=count.waiting,
        parked=count.parked,
        fate=fate(count.version, declared, old_runs),
    )


def fate(version: int | None, declared: int | None, old_runs: str | None) -> str:
    """What a worker declaring ``declared`` (with ``old_runs``) does with a run of
    ``version`` (SPEC VER-05..08)."""
    if declared is None or old_runs is None:
        return "undeclared"
    if version is None:
        return "new"
    if version == declared:
        return "current"
    return old_runs if version < declared else "newer"
