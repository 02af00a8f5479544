"""``XJOBS["ENCRYPTION_KEYS"]``: the keys payloads are encrypted at rest with, read and refused
here with the settings. The first key encrypts, every key decrypts (rotation); ``cryptography``
(the ``encryption`` extra) is imported only when keys are set, so a site without them never
needs it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ConfigInvalidError

if TYPE_CHECKING:
    from cryptography.fernet import Fernet, MultiFernet

#: what to install for ``ENCRYPTION_KEYS``
INSTALL = "pip install 'cryptography>=42' (the encryption extra)"


@dataclass(frozen=True)
class Keyring:
    """The configured keys as one ``MultiFernet``, and a short fingerprint of each (a digest,
    never the key) that rotation and the docs name them by."""

    fernet: MultiFernet
    fingerprints: tuple[str, ...]
    #: the first key alone: what ``current`` asks
    primary: Fernet
    #: ``cryptography``'s InvalidToken, kept here so a decrypt on the claim path imports nothing
    invalid: type[Exception]

    def encrypt(self, text: str) -> str:
        """``text`` sealed with the first key: a Fernet token (AES-128-CBC, HMAC-SHA256)."""
        return self.fernet.encrypt(text.encode()).decode("ascii")

    def decrypt(self, token: str) -> str | None:
        """The text of a token any key opens; None when no key does (or it was tampered with)."""
        try:
            return self.fernet.decrypt(token.encode("ascii")).decode()
        except (self.invalid, UnicodeError):
            return None

    def current(self, token: str) -> bool:
        """Whether the first key opens ``token``: rotation leaves such a payload as it is."""
        try:
            self.primary.decrypt(token.encode("ascii"))
        except (self.invalid, UnicodeError):
            return False
        return True

    def rotate(self, token: str) -> str | None:
        """The token re-encrypted with the first key; None when no key opens it."""
        try:
            return self.fernet.rotate(token.encode("ascii")).decode("ascii")
        except (self.invalid, UnicodeError):
            return None


def keyring(raw: object) -> Keyring | None:
    """``ENCRYPTION_KEYS`` as a ``Keyring`` (None: payloads are stored in clear)."""
    if raw is None or raw == [] or raw == ():
        return None
    if isinstance(raw, str | bytes) or not isinstance(raw, list | tuple):
        raise ConfigInvalidError(
            f'XJOBS["ENCRYPTION_KEYS"] must be a list of keys, got {type(raw).__name__}',
            hint="e.g. [env('XJOBS_KEY')]; make a key with: python -c \"from cryptography.fernet "
            'import Fernet; print(Fernet.generate_key().decode())"',
        )
    try:
        from cryptography.fernet import Fernet, InvalidToken, MultiFernet
    except ImportError:
        raise ConfigInvalidError(
            'XJOBS["ENCRYPTION_KEYS"] is set but the cryptography package is not installed',
            hint=INSTALL,
        ) from None
    fernets = []
    for index, key in enumerate(raw):
        try:
            fernets.append(Fernet(key))
        except (TypeError, ValueError):
            # the key itself is never echoed: the error lands in logs and check output
            raise ConfigInvalidError(
                f'XJOBS["ENCRYPTION_KEYS"][{index}] is not a Fernet key (32 url-safe base64 bytes)',
                hint='make one with: python -c "from cryptography.fernet import Fernet; '
                'print(Fernet.generate_key().decode())"',
            ) from None
    prints = tuple(
        hashlib.sha256(k if isinstance(k, bytes) else str(k).encode()).hexdigest()[:8] for k in raw
    )
    return Keyring(MultiFernet(fernets), prints, fernets[0], InvalidToken)
