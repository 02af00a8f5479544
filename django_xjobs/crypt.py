"""Payloads encrypted at rest (``XJOBS["ENCRYPTION_KEYS"]``, issue 46).

A sealed payload is stored as valid ``jsonb`` of one shape, ``{"xjobs:fernet": "<token>"}``: a
Fernet token (``cryptography``'s MultiFernet: AES-128-CBC with an HMAC-SHA256, versioned and
timestamped) of the payload's compact JSON text. No column or migration changes, and a row
written before keys were set (plain JSON) reads as it always did. The key ``xjobs:fernet`` holds a
colon, so it is never a job's keyword input, and ``payload.check_json`` refuses a result, step
output or event datum of that one shape: nothing stored clear can be mistaken for a sealed one.

What is sealed: a job's input (and so its outbox copy, written from the same text), its result,
its steps' outputs and event data (a publish matches its waiters on the data as a statement
parameter; a later waiter opens the candidates in the process). What stays clear: the job's
name, queue, tenant, idempotency (dedupe) key, limit key, state and times, errors (already
redacted) and progress notes. docs/howto/data.md says so to users.
"""

from __future__ import annotations

from typing import TypeGuard

from . import conf
from .errors import EncryptionKeyMissingError
from .payload import SEALED_MARK, JSONValue, NotJSON, decode, dumps

#: the one key of a sealed payload's wrapper
MARK = SEALED_MARK
#: what a reader without the key shows in place of a sealed payload
NO_KEY = "encrypted (no key)"
#: a claimed run's ``undecodable`` reason when its input is sealed with a key this process lacks
KEY_MISSING = "has an input encrypted with a key not in XJOBS['ENCRYPTION_KEYS']"


def is_sealed(value: object) -> TypeGuard[dict[str, JSONValue]]:
    """Whether a stored value is a sealed payload's wrapper."""
    return type(value) is dict and len(value) == 1 and type(value.get(MARK)) is str


def seal(text: str) -> str:
    """The stored text of a payload whose compact JSON is ``text``: the wrapper of its token
    under the first key, or ``text`` itself when no keys are set."""
    keys = conf.get().encryption
    if keys is None:
        return text
    return wrap(keys.encrypt(text))


def wrap(token: str) -> str:
    """A token as its wrapper's JSON text (a Fernet token is url-safe base64: nothing to escape)."""
    return f'{{"{MARK}":"{token}"}}'


def seal_value(value: object) -> object:
    """A payload held as a value (a step's output, the memory of a store) in its stored form."""
    keys = conf.get().encryption
    if keys is None or value is None:
        return value
    return {MARK: keys.encrypt(dumps(value))}


def unseal(value: JSONValue) -> JSONValue:
    """A stored payload as its value: opened when sealed (``EncryptionKeyMissingError`` when no
    configured key opens it), else itself."""
    if not is_sealed(value):
        return value
    keys = conf.get().encryption
    token = value[MARK]
    text = None if keys is None or not isinstance(token, str) else keys.decrypt(token)
    if text is None:
        raise EncryptionKeyMissingError(
            "a stored payload is encrypted with a key not in XJOBS['ENCRYPTION_KEYS']"
            if keys is not None
            else "a stored payload is encrypted, and XJOBS['ENCRYPTION_KEYS'] is not set"
        )
    try:
        opened: JSONValue = decode(text)
    except NotJSON:  # sealed by this library from checked JSON: only a forged token gets here
        raise EncryptionKeyMissingError(
            "a stored payload decrypts to text that is not JSON"
        ) from None
    return opened


def shown(value: JSONValue) -> JSONValue:
    """A stored payload as a reader shows it: opened, or ``NO_KEY`` when no key opens it (a
    page or command never fails on a row it cannot decrypt)."""
    if not is_sealed(value):
        return value
    try:
        opened: JSONValue = unseal(value)
    except EncryptionKeyMissingError:
        return NO_KEY
    return opened
