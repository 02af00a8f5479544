"""Secrets stay in the process: input values under ``XJOBS["REDACT_KEYS"]`` are masked wherever
inputs are shown, and removed from every text a run produces (error messages, tracebacks, the
failure history, log lines, span events) before it is stored, logged or traced.

A run knows its inputs, so its secrets are collected once when it starts (``secrets_of``) and
every text derived from it goes through ``redact()`` — the one function the settle, the
history, the log events and the spans call. ``XJOBS["REDACT"]``, a dotted path to a callable
``(text) -> text``, runs after the key-based scrub on every such text, for what keys cannot
catch (a card number in a message, a token a handler built itself).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import string
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from . import conf, crypt
from .payload import MAX_DEPTH

#: what a masked value reads as, in inputs and in text
MASK = "[redacted]"

#: the default ``XJOBS["REDACT_KEYS"]`` (defined with the other defaults in ``conf``)
DEFAULT_KEYS = tuple(conf.DEFAULTS["REDACT_KEYS"])

#: a secret shorter than this is masked in inputs but not searched for in text: removing every
#: "1" or "ok" from a traceback would hide the traceback, not the secret
MIN_SECRET = 4

#: the secrets of the run on this thread (or task): log events and spans scrub with them
_current: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "xjobs_secrets", default=frozenset()
)


NOTHING: frozenset[str] = frozenset()


def is_secret_key(key: str, keys: Iterable[str] | None = None) -> bool:
    """Whether ``key`` names a secret: one of ``keys`` (default ``REDACT_KEYS``) is a
    substring of it, case-insensitively."""
    return _is_secret(key, tuple(conf.get().redact_keys if keys is None else keys))


@functools.lru_cache(maxsize=4096)
def _is_secret(key: str, keys: tuple[str, ...]) -> bool:
    # cached: a run collects its secrets on every claim, and input keys repeat job after job
    folded = key.casefold()
    return any(k in folded for k in keys)


def mask(value: object, keys: Iterable[str] | None = None) -> Any:
    """``value`` with everything under a secret key, at any depth, replaced by ``MASK``. A sealed
    payload is opened first, or read as ``crypt.NO_KEY`` when no key opens it (SPEC CRYPT-04)."""
    if crypt.is_sealed(value):
        value = crypt.shown(value)
    keys = tuple(conf.get().redact_keys if keys is None else keys)
    if not keys:
        return value
    return _mask(value, keys)


#: deeper than anything an enqueue accepts (payload.MAX_DEPTH): only a row written by another
#: version or by SQL nests further, and masking it must not recurse past Python's limit
MAX_WALK = 2 * MAX_DEPTH

#: what a value nested past ``MAX_WALK`` reads as once masked
TOO_DEEP = "[nested too deeply]"


def _mask(value: object, keys: tuple[str, ...], depth: int = 0) -> Any:
    if depth >= MAX_WALK and isinstance(value, Mapping | list | tuple):
        return TOO_DEEP
    if isinstance(value, Mapping):
        return {
            k: MASK if isinstance(k, str) and _is_secret(k, keys) else _mask(v, keys, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_mask(item, keys, depth + 1) for item in value]
    return value


def secrets_of(value: object, keys: Iterable[str] | None = None) -> frozenset[str]:
    """Every value under a secret key of ``value`` (at any depth; the leaves of a nested one),
    as text, long enough to search for (``MIN_SECRET``)."""
    keys = conf.get().redact_keys if keys is None else tuple(keys)
    if not keys:
        return NOTHING
    found: set[str] = set()
    _collect(value, keys, found, under_secret=False)
    return frozenset(s for s in found if len(s) >= MIN_SECRET) if found else NOTHING


def _collect(
    value: object, keys: tuple[str, ...], found: set[str], *, under_secret: bool, depth: int = 0
) -> None:
    # inputs are decoded JSON: plain dicts and lists (isinstance against an ABC costs more)
    if depth >= MAX_WALK:
        return  # only a row no enqueue accepted nests this deep (MAX_WALK)
    if isinstance(value, dict):
        for k, v in value.items():
            secret = under_secret or (isinstance(k, str) and _is_secret(k, keys))
            _collect(v, keys, found, under_secret=secret, depth=depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect(item, keys, found, under_secret=under_secret, depth=depth + 1)
    elif under_secret and value is not None and not isinstance(value, bool):
        found.add(str(value))


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` without any of ``secrets`` (default: the current run's), then through
    ``XJOBS["REDACT"]`` when set. The one scrub every stored, logged or traced text passes."""
    if secrets is None:
        secrets = _current.get()
    if secrets:
        # longest first: a secret that contains another is removed whole
        for secret in sorted(secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, MASK)
    hook = conf.get().redact
    return text if hook is None else str(hook(text))


def current() -> frozenset[str]:
    """The secrets of the run this code executes for (empty outside a run)."""
    return _current.get()


@contextlib.contextmanager
def scope(secrets: frozenset[str]) -> Iterator[None]:
    """Make ``secrets`` the current run's for what executes inside (log events, spans)."""
    token = _current.set(secrets)
    try:
        yield
    finally:
        _current.reset(token)


def scrubber(secrets: frozenset[str]) -> Callable[[str], str]:
    """``redact`` bound to one run's secrets, for code that outlives the run's scope."""
    return lambda text: redact(text, secrets)


def key_shown(
    key: str, template: object, *, values: bool, keys: Iterable[str] | None = None
) -> str:
    """A key rendered from a job's inputs (an idempotency key, a limit key's rendered part) as
    a viewer may see it, the inputs' own rule applied to what was made of them (issue 40):

    - with ``values`` (the payload permission), the key itself, or ``MASK`` when ``template``
      reads an input under a secret key (``REDACT_KEYS``), as that input is masked;
    - without, the template it was rendered from (``"charge:{order_id}"``): which inputs, never
      their values; ``MASK`` when there is no template to show (a callable made the key).

    A key no input is read into (a template without fields) shows as it is.
    """
    if not isinstance(template, str):
        return key if values else MASK
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError:
        return MASK
    if not fields:
        return key
    if not values:
        return template
    roots = (f.split(".", 1)[0].split("[", 1)[0] for f in fields)
    secret = tuple(conf.get().redact_keys if keys is None else keys)
    return MASK if any(_is_secret(root, secret) for root in roots if root) else key
