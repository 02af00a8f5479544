"""Every text the library stores or prints passes through here: one place that makes it safe.

PostgreSQL refuses NUL in ``text`` and ``jsonb``, and psycopg cannot encode a lone surrogate:
a settle carrying either would fail on every attempt, and the real error would be lost. A
message of any size would be copied into every admin row and log line. So ``storable`` is the
one function stored and logged texts flow through (an error message, a traceback, a cancel
reason); a text that names something (a tenant, an event, a step) is refused instead, by
``check_name``, when ``storable`` would have to change it. ``printable`` is what the CLI shows
of a stored text: no terminal escape sequences.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import InvariantError, XJobsError

#: a stored message (``last_error``, a history entry's message, a cancel reason) above this
#: many UTF-8 bytes keeps its head and tail around a marker
MESSAGE_LIMIT = 4 * 1024
#: a stored traceback above this many UTF-8 bytes is cut the same way
TRACEBACK_LIMIT = 16 * 1024
#: of a cut text, the share kept from its start: the outermost frames and any chained cause
_HEAD_SHARE = 0.25

#: ANSI escape sequences (CSI, OSC, two-character escapes) and the C0/C1 controls, except
#: tab and newline: what could move a terminal's cursor, retitle it or hide text
_TERMINAL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI ... final byte
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL or ST
    r"|\x1b[@-_]?"  # any other escape
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


def storable(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` as it can be stored and logged: NUL written ``\\x00``, a lone surrogate as
    its ``\\udXXX`` escape, cut to ``limit`` UTF-8 bytes (head and tail kept)::

        storable("bad \\x00 byte")  # 'bad \\\\x00 byte'
    """
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    if not text.isascii():
        text = text.encode(errors="backslashreplace").decode()
    return cap(text, limit)


def check_name(value: object, field: str, *, error: type[XJobsError] = InvariantError) -> None:
    """Refuse ``value`` (a name or key the library stores and looks up by) when it is not a
    string ``storable`` would keep as it is: a name cannot be rewritten without breaking the
    lookups made by it."""
    if not isinstance(value, str):
        return
    if "\x00" in value:
        raise error(
            f"{field} contains a NUL character (\\x00), which PostgreSQL cannot store",
            hint="remove the NUL from the value",
        )
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise error(
                f"{field} contains a lone surrogate, which is not UTF-8 text",
                hint="decode the value properly (a lone surrogate is half of a character)",
            ) from None


#: characters a name that says who did something (``by=``) or names a cron may hold
NAME_LIMIT = 200


def check_label(value: object, field: str, *, error: type[XJobsError] = InvariantError) -> None:
    """Refuse ``value`` (a cron's name, an operator's ``by=``: a text stored, looked up and
    printed as it is) unless ``check_name`` keeps it, it holds no terminal escape or control
    character, and it is at most ``NAME_LIMIT`` characters: such a name reached the terminal
    through every error message that quoted it (issue 40)."""
    if not isinstance(value, str):
        return
    check_name(value, field, error=error)
    if printable(value) != value or "\n" in value or "\t" in value:
        raise error(
            f"{field} {value[:60]!r} contains a control character or a terminal escape",
            hint="use letters, digits and punctuation",
        )
    if len(value) > NAME_LIMIT:
        raise error(
            f"{field} is {len(value):,} characters; at most {NAME_LIMIT} are accepted",
            hint="give a shorter name",
        )


def printable(text: str) -> str:
    """A stored text as a terminal may show it: escape sequences and control characters
    dropped (tab and newline kept), so a stored value cannot rewrite the operator's screen."""
    return _TERMINAL.sub("", text)


def cap(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` UTF-8 bytes, else its head and tail around a marker
    that says how much was cut; the result always fits."""
    if len(text) * 4 <= limit:  # even four bytes a character would fit: no need to encode
        return text
    data = text.encode()
    if len(data) <= limit:
        return text
    # the marker's own length depends on the count it prints; size it for the largest count
    room = limit - len(_marker(len(data), limit).encode())
    head = int(room * _HEAD_SHARE)
    tail = room - head
    cut = len(data) - head - tail
    # a cut inside a multi-byte character drops that character rather than the limit
    start = data[:head].decode(errors="ignore")
    end = data[len(data) - tail :].decode(errors="ignore")
    return f"{start}{_marker(cut, limit)}{end}"


def _marker(cut: int, limit: int) -> str:
    return f"\n[... {cut} bytes cut to keep it within {limit} bytes ...]\n"


def did_you_mean(given: Any, known: Any) -> str:
    """``"did you mean 'VISIBILITY_TIMEOUT'?"`` for a name close to one of ``known`` (a
    misspelt setting or queue), else ``""``: what a hint leads with."""
    import difflib

    if not isinstance(given, str):
        return ""
    names = [name for name in known if isinstance(name, str)]
    found = difflib.get_close_matches(given, names, n=1, cutoff=0.6)
    if not found:  # case: "visibility_timeout" for "VISIBILITY_TIMEOUT"
        folded = {name.casefold(): name for name in names}
        found = [folded[given.casefold()]] if given.casefold() in folded else []
    return f"did you mean {found[0]!r}?" if found else ""
