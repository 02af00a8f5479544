"""The chaos suite (``make chaos``): real workers, real PostgreSQL, real faults, one table.

Not part of ``make test``: each scenario runs up to 90 s. See ``python -m chaos --help``.
"""

#: the scenarios, in the order they run (chaos.scenarios defines each)
NAMES = (
    "sigkill",
    "sigstop",
    "terminate",
    "restart",
    "outage",
    "outage-drain",
    "deploy",
    "suspect",
    "silent-drop",
    "exhaustion",
    "starved",
    "hung",
    "producer",
)
