"""``XJOBS["QUEUE_DATABASES"]``, ``XJOBS["ROUTER"]`` and ``XJOBS["JOB_DATABASES"]``: which
Django database alias each job lives in (issue 48), read and refused here with the settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import cast

from django.conf import settings
from django.utils.module_loading import import_string

from ..errors import ConfigInvalidError, RouteUnknownError
from .concurrency import QUEUE_NAME

#: what a ROUTER is: ``route(queue, tenant_id) -> alias``
Router = Callable[[str, "str | None"], str]


@dataclass(frozen=True)
class Routing:
    """Where each job lives: ``queues`` names the alias of some queues, ``router`` (when set)
    decides for every job, and every other job lives in ``default`` (``XJOBS["DATABASE"]``).
    ``aliases`` are every database jobs may live in, ``default`` first: the ones a worker
    claims from and a read asks (SPEC SHARD-01)."""

    default: str
    queues: Mapping[str, str]
    router: Router | None
    aliases: tuple[str, ...]

    def alias(self, queue: str, tenant_id: str | None) -> str:
        """The alias a job of ``queue`` (for ``tenant_id``) lives in; a router's answer outside
        ``aliases`` raises ``RouteUnknownError`` (SPEC SHARD-02)."""
        if self.router is None:
            return self.queues.get(queue, self.default)
        alias = self.router(queue, tenant_id)
        if alias not in self.aliases:
            raise RouteUnknownError(
                f"XJOBS['ROUTER'] routed queue {queue!r} (tenant {tenant_id!r}) to {alias!r}, "
                "which is not one of the jobs' databases",
                hint=f"return one of {', '.join(self.aliases)}, or list it in "
                'XJOBS["JOB_DATABASES"]',
            )
        return alias

    def queue_aliases(self, queue: str) -> tuple[str, ...]:
        """Every alias a job of ``queue`` may live in: its own, or all of them with a router
        (a router may place a queue's tenants anywhere)."""
        if self.router is None:
            return (self.queues.get(queue, self.default),)
        return self.aliases


def parse_routing(merged: Mapping[str, object]) -> Routing | None:
    """The routing the settings ask for, or None when jobs live in ``DATABASE`` only (then
    nothing changes, not one statement)."""
    default = cast(str, merged["DATABASE"])
    queues = _queue_databases(merged["QUEUE_DATABASES"])
    router = _router(merged["ROUTER"])
    extra = _job_databases(merged["JOB_DATABASES"])
    if not queues and router is None and not extra:
        return None
    aliases = tuple(dict.fromkeys([default, *queues.values(), *extra]))
    if aliases == (default,) and router is None:
        return None  # every queue named routes to the jobs database: nothing to route
    if merged["READ_DATABASE"] not in (None, default):
        raise ConfigInvalidError(
            'XJOBS["READ_DATABASE"] cannot be combined with jobs in several databases yet',
            hint="leave READ_DATABASE None while QUEUE_DATABASES or ROUTER is set",
        )
    return Routing(default, MappingProxyType(dict(queues)), router, aliases)


def _alias(raw: object, key: str) -> str:
    if not isinstance(raw, str) or raw not in settings.DATABASES:
        raise ConfigInvalidError(
            f'XJOBS["{key}"] names {raw!r}, which is not an alias in DATABASES',
            hint=f"aliases: {', '.join(settings.DATABASES)}",
        )
    return raw


def _queue_databases(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigInvalidError(
            f'XJOBS["QUEUE_DATABASES"]={raw!r} must map queue names to database aliases',
            hint='e.g. {"reports": "jobs_b"}; every other queue stays in XJOBS["DATABASE"]',
        )
    for queue in raw:
        if not isinstance(queue, str) or not QUEUE_NAME.match(queue):
            raise ConfigInvalidError(
                f'XJOBS["QUEUE_DATABASES"] names queue {queue!r}, which is not a valid name',
                hint="use 1-64 letters, digits, '_', '.', ':' or '-', starting with a letter or digit",
            )
    return {queue: _alias(alias, "QUEUE_DATABASES") for queue, alias in raw.items()}


def _job_databases(raw: object) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str) or not isinstance(raw, list | tuple):
        raise ConfigInvalidError(
            f'XJOBS["JOB_DATABASES"]={raw!r} must list database aliases',
            hint='e.g. ["jobs_b", "jobs_c"]: every alias XJOBS["ROUTER"] may answer',
        )
    return [_alias(alias, "JOB_DATABASES") for alias in raw]


def _router(raw: object) -> Router | None:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ConfigInvalidError(
            f'XJOBS["ROUTER"]={raw!r} must be a dotted path to a function',
            hint='e.g. "myapp.jobs_routing.route", a function (queue, tenant_id) -> alias',
        )
    try:
        route = import_string(raw)
    except ImportError as error:
        raise ConfigInvalidError(
            f'XJOBS["ROUTER"]={raw!r} cannot be imported: {error}',
            hint="name a module-level function (queue, tenant_id) -> alias",
        ) from None
    if not callable(route):
        raise ConfigInvalidError(
            f'XJOBS["ROUTER"]={raw!r} is not callable',
            hint="name a function (queue, tenant_id) -> alias",
        )
    return cast(Router, route)  # a callable; its signature is the user's word
