"""Fleet-wide limits a job declares: ``@job(concurrency=1, limit_key="{account_id}")`` and
``@job(rate_limit="100/m", limit_key="{partner_id}")``.

A run of such a job carries its key on its row (``x_jobs.limit_key``: the job's name, a unit
separator, then the rendered template; without a template the name alone, so the limit is per job
name). The claim reads the key and decides there, so a run over its limit is never claimed
(``limits.worker``, drivers' ``claim(limits=...)``). The limits themselves are in code: every
worker of one deploy passes the same ones with its claim.

This module sits in the base, since the drivers render a run's key where they write its row; what
each job declares is held by the registry above it, which hands it down when it is imported
(``use_declared``), so nothing here climbs to ask it.
"""

from __future__ import annotations

import inspect
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from .. import conf
from ..errors import InputInvalidError, InvariantError
from ..text import storable

#: between the job's name and the rendered template: a job name never holds it
SEPARATOR = "\x1f"
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([smh])\s*$")
#: bytes of UTF-8 a rendered limit key or fair-share group may hold: the key is stored in a btree
#: index after the job's name (at most 800 bytes), which PostgreSQL caps at 2,704 bytes an entry
MAX_RENDERED_BYTES = 1024
#: a limit for ``storable`` that never cuts: an oversized key is refused, not shortened
_UNCUT = 1 << 62
#: what rendering a template over JSON inputs can raise: a missing input (KeyError), an index
#: or attribute the value lacks, a format spec the value's type refuses (``{n:05d}`` given a
#: string: ValueError), an item of a value that has none (``{a[id]}`` given a string: TypeError)
_RENDER_ERRORS = (KeyError, IndexError, AttributeError, ValueError, TypeError, OverflowError)
_RATE_HINT = 'write starts per window: "100/m", "10/s", "500/h" (or "30/5m" for 30 per 5 minutes)'


@dataclass(frozen=True)
class Rate:
    """At most ``limit`` starts in any ``window`` seconds."""

    limit: int
    window: float

    def __str__(self) -> str:
        return f"{self.limit}/{self.window:g}s"


def parse_rate(value: object, *, field: str = "rate_limit") -> Rate:
    """``"100/m"`` as ``Rate(100, 60.0)``; windows in seconds, minutes or hours.

    >>> parse_rate("10/s"), parse_rate("30/5m")
    (Rate(limit=10, window=1.0), Rate(limit=30, window=300.0))
    """
    match = _RATE.match(value) if isinstance(value, str) else None
    if match is None:
        raise InvariantError(f"{field}={value!r} is not a rate", hint=_RATE_HINT)
    count, many, unit = int(match[1]), int(match[2] or 1), match[3]
    if count < 1 or many < 1:
        raise InvariantError(f"{field}={value!r} must allow at least one start", hint=_RATE_HINT)
    return Rate(count, many * _UNITS[unit])


def check_template(template: object, signature: inspect.Signature) -> str | None:
    """A ``limit_key`` declaration: None, or a ``str.format`` template over the job's inputs."""
    if template is None:
        return None
    hint = 'a template over the inputs, e.g. limit_key="{account_id}"'
    if not isinstance(template, str) or not template:
        raise InvariantError(f"limit_key={template!r} must be a non-empty str template", hint=hint)
    params = list(signature.parameters.values())[1:]
    names = {p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD}
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as error:
        raise InvariantError(
            f"limit_key={template!r} is not a template: {error}", hint=hint
        ) from None
    for field in fields:
        root = field.split(".", 1)[0].split("[", 1)[0]
        if not root or (root not in names and not open_ended):
            raise InvariantError(
                f"limit_key={template!r} uses {{{field}}}, which is not an input of the job",
                hint=f"the inputs are {', '.join(sorted(names)) or '(none)'}",
            )
    return template


def render(name: str, template: str | None, inputs: Mapping[str, object]) -> str:
    """The key a run of job ``name`` with ``inputs`` counts against. Raises
    ``X_INPUT_INVALID`` when the inputs cannot fill the template or the key is over
    ``MAX_RENDERED_BYTES``: the enqueue refuses them, and a publish quarantines a staged row that
    carries them (issue 40), the same function deciding both."""
    if template is None:
        return name + SEPARATOR
    try:
        rendered = template.format(**inputs)
    except _RENDER_ERRORS as error:
        raise InputInvalidError(
            f"job {name!r}: limit_key={template!r} cannot be rendered from the inputs "
            f"({type(error).__name__}: {error})",
            hint="give every input the template names, of a type its format accepts",
            field="limit_key",
        ) from None
    return name + SEPARATOR + _bounded(name, "limit_key", rendered)


def _bounded(name: str, field: str, rendered: str) -> str:
    """``rendered`` as stored (no NUL; a lone surrogate a format such as ``{n:c}`` can make
    escaped, as ``text.storable`` writes it), refused when over ``MAX_RENDERED_BYTES``."""
    rendered = storable(rendered.replace("\x00", ""), limit=_UNCUT)
    if len(rendered) * 4 > MAX_RENDERED_BYTES:  # at most 4 bytes a character: fits otherwise
        size = len(rendered.encode("utf-8", "surrogatepass"))
        if size > MAX_RENDERED_BYTES:
            raise InputInvalidError(
                f"job {name!r}: the {field} rendered from the inputs is {size:,} bytes; at most "
                f"{MAX_RENDERED_BYTES:,} bytes are accepted",
                hint="name a short input in the template (an id, not a document)",
                field=field,
                limit=MAX_RENDERED_BYTES,
                size=size,
            )
    return rendered


def shown(key: str) -> str:
    """A stored key as people read it: ``name[rendered]``."""
    name, _, rendered = key.partition(SEPARATOR)
    return f"{name}[{rendered}]" if rendered else name


def key_of(
    name: str, inputs: object, tenant: str | None = None, *, fair: bool = True
) -> str | None:
    """The limit key of a run of the registered job ``name``, None when it declares no limit
    (or this process does not know the job: its run then counts against nothing). Under
    ``XJOBS["FAIR_SHARE"]`` a run with no limit of its own gets its fair-share group's key: no
    job name before the separator, so no limit applies to it, only the claim's turns."""
    limits = _declared.limits_of(name)  # a declared job only: no task lookup per enqueue
    if limits is not None and isinstance(inputs, Mapping):
        return render(name, limits.key, inputs)
    share = conf.get().fair_share if fair else None
    if share is None:
        return None
    if share == "tenant":
        return tenant_key(tenant)
    try:
        group = share.format(**inputs) if isinstance(inputs, Mapping) else ""
    except _RENDER_ERRORS:
        group = ""  # a job without the input (or of another type) shares the ungrouped turn
    return SEPARATOR + _bounded(name, "fair-share group", group)


def tenant_key(tenant: str | None) -> str:
    """The limit key ``XJOBS["FAIR_SHARE"] = "tenant"`` gives a run of ``tenant``: its
    x_limit_keys row is named by the tenant id, and goes with its erasure (SPEC ERASE-05)."""
    return SEPARATOR + (tenant or "")


def keyless(name: str) -> bool:
    """Whether no run of ``name`` carries a limit key, whatever its inputs (``key_of`` is None
    for each): it declares no limit and no fair share applies. A batch of one job asks once,
    not once per row."""
    return _declared.limits_of(name) is None and conf.get().fair_share is None


def limited_names() -> list[str]:
    """The registered jobs whose runs carry a limit key."""
    return _declared.limited_names()


@dataclass(frozen=True)
class JobLimits:
    """What one job declares: a key template (None: per job name), and the cap on its runs at
    once and its starts per window, per key, fleet-wide."""

    key: str | None
    concurrency: int | None
    rate: Rate | None


def declared(
    limit_key: object, concurrency: int | None, rate_limit: object, signature: inspect.Signature
) -> JobLimits | None:
    """The limits ``@job`` declares, or None when it declares none the claim decides.

    ``concurrency`` without ``limit_key`` or ``rate_limit`` stays the per-name slot it always was
    (SPEC SLOT-*); with a ``limit_key`` it is per key, decided in the claim.
    """
    template = check_template(limit_key, signature)
    rate = None if rate_limit is None else parse_rate(rate_limit)
    if template is None and rate is None:
        return None
    return JobLimits(
        key=template, concurrency=concurrency if template is not None else None, rate=rate
    )


class Declared(Protocol):
    """What this module asks of the declared jobs; ``declarations.registry`` answers it, and
    installs its answer with ``use_declared`` when it is imported."""

    def limits_of(self, name: str) -> JobLimits | None:
        """The limits job ``name`` declares; None for a job that declares none, or that this
        process does not know."""

    def limited_names(self) -> list[str]:
        """The declared jobs whose runs carry a limit key, sorted by name."""


class _Undeclared:
    """Before the registry is imported, no job is declared: no run carries a limit key."""

    def limits_of(self, name: str) -> JobLimits | None:
        return None

    def limited_names(self) -> list[str]:
        return []


#: the declared jobs, as the registry answers for them (held, not looked up: every enqueue asks)
_declared: Declared = _Undeclared()


def use_declared(declared: Declared) -> None:
    """Answer ``key_of``, ``keyless`` and ``limited_names`` from ``declared`` (the registry calls
    this when it is imported)."""
    global _declared
    _declared = declared
