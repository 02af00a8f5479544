"""The ``XJOBS`` setting: defaults, validation, and one cached, typed view of it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from django.conf import settings
from django.core.signals import setting_changed
from django.db import connections
from django.dispatch import receiver
from django.utils.module_loading import import_string

from ..durations import parse_duration
from ..errors import ConfigInvalidError, InvariantError, XJobsError
from ..text import did_you_mean
from .concurrency import MAX_THREADS as MAX_THREADS
from .concurrency import QUEUE_NAME as QUEUE_NAME
from .concurrency import parse_concurrency
from .encryption import Keyring, keyring
from .limits import Limits, parse_limits
from .routing import Routing, parse_routing

DEFAULTS: dict[str, Any] = {
    # the database alias that holds the x_* tables
    "DATABASE": "default",
    # "postgres" (production) or "memory" (one process, for tests and experiments)
    "DRIVER": "postgres",
    # queue names jobs may be routed to with .using(queue=...) beyond those jobs declare
    "QUEUES": [],
    # a claim holds a job this long unless the worker's heartbeat renews it (SPEC LEASE-01)
    "VISIBILITY_TIMEOUT": 30,
    # how often the heartbeat renews (default: a third of VISIBILITY_TIMEOUT, SPEC LEASE-03)
    "HEARTBEAT_INTERVAL": None,
    # how often an idle worker looks for due jobs when no notification woke it
    "POLL_INTERVAL": 1,
    # threads per worker process when --concurrency is not given: one number for a pool every
    # queue shares, or threads per queue ({"default": 8, "emails": 2} or "default=8,emails=2")
    "CONCURRENCY": 5,
    # claimed runs a worker keeps queued ahead of its threads: "auto" sizes it to what the
    # threads get through in two claim round trips (at most 64), or a fixed count (0: none)
    "PREFETCH": "auto",
    # inputs and results larger than this are refused at enqueue / settle
    "MAX_PAYLOAD_BYTES": 256 * 1024,
    # a row whose job name no process knows is parked this long between looks (SPEC EXEC-10)
    "UNKNOWN_JOB_DELAY": 30,
    # ... and dead-lettered once it has been unknown this long after it was created
    "UNKNOWN_JOB_GRACE": 24 * 3600,
    # enqueue inside atomic(): "auto" stages in the outbox (direct outside atomic), "required"
    # refuses an enqueue outside atomic(), "off" always enqueues directly
    "OUTBOX": "auto",
    # database aliases whose atomic() blocks stage into their own x_outbox (default: DATABASE)
    "OUTBOX_DATABASES": None,
    # a relay's claim on staged rows lapses after this, so a dead relay strands nothing
    "OUTBOX_CLAIM_LEASE": 30,
    # published outbox rows are kept this long as an audit trail, then pruned by the relay
    "OUTBOX_RETENTION": 7 * 86400,
    # rows a relay publishes per pass, and its pause between passes when idle
    "RELAY_BATCH_SIZE": 100,
    "RELAY_INTERVAL": 0.2,
    # per-process caps on runs in flight (SPEC LIMIT-*): "global", "per_queue", "per_tenant",
    # "rate_per_tenant" {"limit", "window"}, "max_tenants"; see limits/worker.py
    "LIMITS": {},
    # a job whose runs die with their worker this many times in a row is dead-lettered
    "MAX_LEASE_EXPIRIES": 3,
    # a run that fails because the database connection failed (refused, too many clients, an
    # administrator shutdown) is retried this many times per job and worker process without
    # spending an attempt, backing off from 1 s to 30 s; then it spends attempts again
    "OUTAGE_RETRIES": 10,
    # finished jobs older than this, per state, are deleted by workers (hourly, in batches);
    # e.g. {"done": "7d", "cancelled": "7d", "dead": "90d"}; {} keeps everything
    "RETENTION": {},
    # finished jobs leave x_jobs for the day-partitioned x_job_history (issue 46, HIST-01),
    # moved in batches by workers HISTORY_GRACE after they finished; RETENTION then drops whole
    # days of it. False: finished rows stay in x_jobs and RETENTION deletes them row by row
    "HISTORY": True,
    "HISTORY_GRACE": 3600,
    # days of partitions kept created ahead of today
    "HISTORY_AHEAD": 3,
    # the overview's per-minute rollup (rollup.py) and queue depth samples (worker/depth.py)
    # are kept this long, then pruned by the same hourly pass as RETENTION
    "ROLLUP_RETENTION": 3 * 86400,
    # the operators' audit trail (x_operator_actions, issue 45) is kept this long, then pruned
    # by the same hourly pass as RETENTION and by xjobs prune
    "AUDIT_RETENTION": 90 * 86400,
    # libpq options every connection of a worker, relay or scheduler process opens with (merged
    # under DATABASES OPTIONS, which win): a silently dropped connection fails instead of hanging
    "CONNECTION_OPTIONS": {
        "connect_timeout": 10,
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": 30000,
    },
    # steps one run may take (a backfill pass takes one a page): the step timeline and the
    # records each attempt reads back stay bounded
    "MAX_STEPS_PER_RUN": 100_000,
    # snoozes one job may take (ctx.snooze): past it the run fails with X_JOB_SNOOZE_LIMIT
    "MAX_SNOOZES": 100,
    # statement_timeout and lock_timeout of the roles' own statements (claim, settle, heartbeat,
    # relay, scheduler); job bodies are not bounded by it
    "STATEMENT_TIMEOUT": 30,
    # a worker whose claim loop or settler makes no progress for this long exits non-zero
    "STALL_TIMEOUT": 120,
    # a worker whose threads have been at least half held by bodies past their timeout for this
    # long drains and starts afresh (the process ends them); None: never (issue 25 item 3)
    "ABANDONED_RECYCLE_AFTER": 10,
    # hot-path statements run as server-side prepared statements: True, False, or "auto" (on
    # unless the alias sets DISABLE_SERVER_SIDE_CURSORS, Django's sign of a transaction pooler)
    "PREPARED_STATEMENTS": "auto",
    # None: DATABASES reach PostgreSQL directly (or through a session-mode pooler); "transaction":
    # the jobs' and outboxes' aliases go through a transaction-mode pooler (PgBouncer), so no
    # session state is kept: no session settings, no prepared statements on "auto", no LISTEN
    "POOLER": None,
    # the alias of a direct (unpooled) connection to the jobs database that workers and relays
    # LISTEN on; without it, behind a transaction pooler they poll every POLL_INTERVAL
    "LISTEN_DATABASE": None,
    # the alias the read surfaces (the admin's lists and overview, xjobs ls/queues/show/why, the
    # metrics) read from, e.g. a streaming replica; None: the jobs database (issue 46 item 2)
    "READ_DATABASE": None,
    # jobs in several databases (issue 48, docs/howto/sharding.md): {"queue": "alias"}, a
    # dotted path to route(queue, tenant_id) -> alias, and every alias that router may answer
    "QUEUE_DATABASES": None,
    "ROUTER": None,
    "JOB_DATABASES": None,
    # the name of this deployment ("production", "staging"...): a backfill declared for some
    # environments runs only in those, and its ledger records where each pass ran
    "ENVIRONMENT": None,
    # input keys whose values are secrets: masked wherever inputs are shown and removed from
    # every text a run produces (errors, tracebacks, history, logs, spans). A key matches when
    # one of these is a substring of it, case-insensitively ("DB_PASSWORD", "x-api-key")
    "REDACT_KEYS": [
        "password",
        "passwd",
        "secret",
        "token",
        "api_key",
        "apikey",
        "api-key",
        "authorization",
        "cookie",
        "session",
        "private_key",
        "credential",
    ],
    # a dotted path to a callable (text) -> text run on every text the library stores, logs or
    # traces, after REDACT_KEYS: for secrets no key names (a card number in a message)
    "REDACT": None,
    # "tenant" or a template over the inputs ("{customer_id}"): claims take work round-robin
    # across those groups, so one that enqueued 50,000 runs does not hold back one with 100
    "FAIR_SHARE": None,
    # keys that inputs, results, step outputs and outbox copies are encrypted at rest with: the
    # first encrypts, every one decrypts (docs/howto/data.md); needs the encryption extra
    "ENCRYPTION_KEYS": None,
}

#: the bounds of the numeric settings (docs/reference/settings.md): far past any real use, so
#: a typo (an extra three zeros) is refused at startup instead of exhausting the machine
MAX_BATCH = 10_000  # rows per relay batch, and runs prefetched ahead of the threads
MAX_PAYLOAD_CAP = 64 * 1024 * 1024  # MAX_PAYLOAD_BYTES: PostgreSQL's jsonb stops at 255 MB
MAX_COUNT = 1000  # MAX_LEASE_EXPIRIES and OUTAGE_RETRIES
MAX_STEPS = 1_000_000  # MAX_STEPS_PER_RUN
MAX_SNOOZE_COUNT = 1_000_000  # MAX_SNOOZES
MAX_AHEAD_DAYS = 366  # HISTORY_AHEAD
#: HISTORY_GRACE's floor: a relay that published a staged job and died before marking it
#: published publishes it again once its claim lapses; the job must still be in x_jobs then,
#: where the id's second insert finds it (SPEC OUTBOX-*, HIST-04)
MIN_HISTORY_GRACE = 60.0


@dataclass(frozen=True)
class XJobsSettings:
    database: str
    driver: str
    queues: tuple[str, ...]
    visibility_timeout: float
    heartbeat_interval: float
    poll_interval: float
    #: one pool every queue shares, or threads per queue (worker/pools.py)
    concurrency: int | dict[str, int]
    prefetch: int | str
    max_payload_bytes: int
    unknown_job_delay: float
    unknown_job_grace: float
    outbox: str
    outbox_databases: tuple[str, ...]
    outbox_claim_lease: float
    outbox_retention: float
    relay_batch_size: int
    relay_interval: float
    limits: Any
    max_lease_expiries: int
    outage_retries: int
    retention: dict[str, float]
    rollup_retention: float
    audit_retention: float
    connection_options: dict[str, Any]
    statement_timeout: float
    stall_timeout: float
    abandoned_recycle_after: float | None
    prepared_statements: bool | str
    max_steps_per_run: int = 100_000
    max_snoozes: int = 100
    environment: str | None = None
    pooler: str | None = None
    listen_database: str | None = None
    #: the alias the read surfaces read from; None: ``database`` (drivers/reading.py)
    read_database: str | None = None
    redact_keys: tuple[str, ...] = tuple(DEFAULTS["REDACT_KEYS"])
    redact: Callable[[str], str] | None = None
    fair_share: str | None = None
    encryption: Keyring | None = None
    history: bool = False
    history_grace: float = 3600.0
    history_ahead: int = 3
    #: where each job lives when jobs are in several databases; None: ``database`` only
    routing: Routing | None = None


def validate(raw: object) -> XJobsSettings:
    """Check a raw ``XJOBS`` dict; raise ``ConfigInvalidError`` naming the first bad key."""
    if not isinstance(raw, dict):
        raise ConfigInvalidError(
            f"XJOBS must be a dict, got {type(raw).__name__}",
            hint='e.g. XJOBS = {"DATABASE": "default"}',
        )
    unknown = sorted(set(raw) - set(DEFAULTS), key=str)
    if unknown:
        guesses = [f"{key!r}: {guess}" for key in unknown if (guess := did_you_mean(key, DEFAULTS))]
        raise ConfigInvalidError(
            f"XJOBS has unknown key(s) {', '.join(map(str, unknown))}",
            hint="; ".join([*guesses, f"known keys: {', '.join(sorted(DEFAULTS))}"]),
        )
    merged = {**DEFAULTS, **raw}

    def duration(key: str) -> float:
        try:
            return parse_duration(merged[key], field=f'XJOBS["{key}"]')
        except XJobsError as error:
            raise ConfigInvalidError(error.message, hint=error.hint) from error

    def positive_int(key: str, most: int) -> int:
        value = merged[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise ConfigInvalidError(
                f'XJOBS["{key}"]={value!r} must be a positive integer, at most {most:,}',
                hint=f"the default is {DEFAULTS[key]!r}",
            )
        return value

    outage_retries = merged["OUTAGE_RETRIES"]
    if (
        isinstance(outage_retries, bool)
        or not isinstance(outage_retries, int)
        or not 0 <= outage_retries <= MAX_COUNT
    ):
        raise ConfigInvalidError(
            f'XJOBS["OUTAGE_RETRIES"]={outage_retries!r} must be a whole number from 0 to '
            f"{MAX_COUNT:,}",
            hint="the default is 10; 0 makes a connection failure spend an attempt",
        )
    if merged["DRIVER"] not in ("postgres", "memory"):
        raise ConfigInvalidError(
            f'XJOBS["DRIVER"]={merged["DRIVER"]!r} is not a driver',
            hint='use "postgres" or "memory"',
        )
    if merged["DATABASE"] not in settings.DATABASES:
        raise ConfigInvalidError(
            f'XJOBS["DATABASE"]={merged["DATABASE"]!r} is not an alias in DATABASES',
            hint=f"aliases: {', '.join(settings.DATABASES)}",
        )
    if merged["OUTBOX"] not in ("auto", "required", "off"):
        raise ConfigInvalidError(
            f'XJOBS["OUTBOX"]={merged["OUTBOX"]!r} is not a mode',
            hint='use "auto" (the default), "required" or "off"',
        )
    visibility = duration("VISIBILITY_TIMEOUT")
    heartbeat = (
        visibility / 3 if merged["HEARTBEAT_INTERVAL"] is None else duration("HEARTBEAT_INTERVAL")
    )
    if visibility < 3 * heartbeat:
        raise ConfigInvalidError(
            f'XJOBS["VISIBILITY_TIMEOUT"] ({visibility:g}s) is shorter than three heartbeats '
            f"({heartbeat:g}s each); one slow renewal would lose every lease",
            hint="raise VISIBILITY_TIMEOUT or lower HEARTBEAT_INTERVAL (default: a third of it)",
        )
    outbox_databases = merged["OUTBOX_DATABASES"] or [merged["DATABASE"]]
    if isinstance(outbox_databases, str) or any(
        alias not in settings.DATABASES for alias in outbox_databases
    ):
        raise ConfigInvalidError(
            f'XJOBS["OUTBOX_DATABASES"]={merged["OUTBOX_DATABASES"]!r} must list aliases of DATABASES',
            hint=f"aliases: {', '.join(settings.DATABASES)}",
        )
    prepared = merged["PREPARED_STATEMENTS"]
    if not (isinstance(prepared, bool) or prepared == "auto"):
        raise ConfigInvalidError(
            f'XJOBS["PREPARED_STATEMENTS"]={prepared!r} is not a mode',
            hint='use "auto" (the default), True or False (behind a transaction-mode pooler '
            "without prepared-statement support)",
        )
    prefetch = merged["PREFETCH"]
    if prefetch != "auto" and (
        isinstance(prefetch, bool)
        or not isinstance(prefetch, int)
        or not 0 <= prefetch <= MAX_BATCH
    ):
        raise ConfigInvalidError(
            f'XJOBS["PREFETCH"]={prefetch!r} must be "auto" or a whole number from 0 to '
            f"{MAX_BATCH:,}",
            hint='"auto" (the default) queues what the threads get through in two claims',
        )
    queues = merged["QUEUES"]
    if isinstance(queues, str) or not all(isinstance(q, str) for q in queues):
        raise ConfigInvalidError('XJOBS["QUEUES"] must be a list of names', hint='e.g. ["emails"]')
    for queue in queues:
        check_queue_name(queue, error=ConfigInvalidError)
    return XJobsSettings(
        database=merged["DATABASE"],
        driver=merged["DRIVER"],
        queues=tuple(queues),
        visibility_timeout=visibility,
        heartbeat_interval=heartbeat,
        poll_interval=duration("POLL_INTERVAL"),
        concurrency=_concurrency(merged["CONCURRENCY"]),
        prefetch=prefetch,
        max_payload_bytes=positive_int("MAX_PAYLOAD_BYTES", MAX_PAYLOAD_CAP),
        unknown_job_delay=duration("UNKNOWN_JOB_DELAY"),
        unknown_job_grace=duration("UNKNOWN_JOB_GRACE"),
        outbox=merged["OUTBOX"],
        outbox_databases=tuple(dict.fromkeys(outbox_databases)),
        outbox_claim_lease=claim_lease(merged["OUTBOX_CLAIM_LEASE"], error=ConfigInvalidError),
        outbox_retention=duration("OUTBOX_RETENTION"),
        relay_batch_size=positive_int("RELAY_BATCH_SIZE", MAX_BATCH),
        relay_interval=duration("RELAY_INTERVAL"),
        limits=_limits(merged["LIMITS"]),
        max_lease_expiries=positive_int("MAX_LEASE_EXPIRIES", MAX_COUNT),
        outage_retries=outage_retries,
        retention=_retention(merged["RETENTION"]),
        rollup_retention=duration("ROLLUP_RETENTION"),
        audit_retention=duration("AUDIT_RETENTION"),
        connection_options=_connection_options(merged["CONNECTION_OPTIONS"]),
        statement_timeout=duration("STATEMENT_TIMEOUT"),
        stall_timeout=duration("STALL_TIMEOUT"),
        abandoned_recycle_after=(
            None
            if merged["ABANDONED_RECYCLE_AFTER"] is None
            else duration("ABANDONED_RECYCLE_AFTER")
        ),
        prepared_statements=prepared,
        max_steps_per_run=positive_int("MAX_STEPS_PER_RUN", MAX_STEPS),
        max_snoozes=positive_int("MAX_SNOOZES", MAX_SNOOZE_COUNT),
        environment=_environment(merged["ENVIRONMENT"]),
        pooler=_pooler(merged["POOLER"]),
        listen_database=_listen_database(merged),
        read_database=_read_database(merged),
        redact_keys=_redact_keys(merged["REDACT_KEYS"]),
        redact=_redact(merged["REDACT"]),
        fair_share=_fair_share(merged["FAIR_SHARE"]),
        encryption=keyring(merged["ENCRYPTION_KEYS"]),
        history=_history(merged["HISTORY"]),
        history_grace=_history_grace(duration("HISTORY_GRACE"), merged),
        history_ahead=positive_int("HISTORY_AHEAD", MAX_AHEAD_DAYS),
        routing=parse_routing(merged),
    )


def _fair_share(raw: object) -> str | None:
    """None, ``"tenant"``, or a template over the inputs naming at least one of them."""
    if raw is None:
        return None
    if raw == "tenant":
        return "tenant"
    import string

    fields = []
    if isinstance(raw, str):
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(raw) if f]
        except ValueError:
            fields = []
    if not isinstance(raw, str) or not fields:
        raise ConfigInvalidError(
            f'XJOBS["FAIR_SHARE"]={raw!r} is not "tenant" or a template over the inputs',
            hint='use "tenant" (the runs\' tenant_id), e.g. "{customer_id}", or None',
        )
    return raw


def _redact_keys(raw: object) -> tuple[str, ...]:
    if isinstance(raw, str) or not isinstance(raw, list | tuple):
        raise ConfigInvalidError(
            f'XJOBS["REDACT_KEYS"]={raw!r} must be a list of key names',
            hint='e.g. ["password", "token"]; [] masks nothing',
        )
    if not all(isinstance(key, str) and key.strip() for key in raw):
        raise ConfigInvalidError(
            f'XJOBS["REDACT_KEYS"]={raw!r} must hold non-empty strings only',
            hint='e.g. ["password", "token"]; a key matches as a case-insensitive substring',
        )
    return tuple(key.casefold() for key in raw)


def _redact(raw: object) -> Callable[[str], str] | None:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ConfigInvalidError(
            f'XJOBS["REDACT"]={raw!r} must be a dotted path to a callable',
            hint='e.g. "myapp.logging.scrub", a function (text) -> text',
        )
    try:
        hook = import_string(raw)
    except ImportError as error:
        raise ConfigInvalidError(
            f'XJOBS["REDACT"]={raw!r} cannot be imported: {error}',
            hint='name a module-level function (text) -> text, e.g. "myapp.logging.scrub"',
        ) from None
    if not callable(hook):
        raise ConfigInvalidError(
            f'XJOBS["REDACT"]={raw!r} is not callable',
            hint="name a function (text) -> text",
        )
    return cast("Callable[[str], str]", hook)  # a callable; its signature is the user's word


def _pooler(raw: object) -> str | None:
    if raw not in (None, "transaction"):
        raise ConfigInvalidError(
            f'XJOBS["POOLER"]={raw!r} is not a pooling mode',
            hint='use None (direct, or a session-mode pooler) or "transaction" (PgBouncer\'s '
            "pool_mode=transaction)",
        )
    return None if raw is None else "transaction"


def _listen_database(merged: Mapping[str, object]) -> str | None:
    raw = merged["LISTEN_DATABASE"]
    if raw is None:
        return None
    if not isinstance(raw, str) or raw not in settings.DATABASES:
        raise ConfigInvalidError(
            f'XJOBS["LISTEN_DATABASE"]={raw!r} is not an alias in DATABASES',
            hint="add an alias with the jobs database's NAME that reaches PostgreSQL directly "
            f"(not through the pooler); aliases: {', '.join(settings.DATABASES)}",
        )
    if merged["POOLER"] == "transaction" and raw == merged["DATABASE"]:
        raise ConfigInvalidError(
            f'XJOBS["LISTEN_DATABASE"]={raw!r} is the pooled jobs database: a LISTEN there '
            "ends with its transaction and no notification arrives",
            hint="name an alias that reaches PostgreSQL directly, or leave it None to poll",
        )
    return raw


def _read_database(merged: Mapping[str, object]) -> str | None:
    raw = merged["READ_DATABASE"]
    if raw is None or raw == merged["DATABASE"]:
        return None
    if not isinstance(raw, str) or raw not in settings.DATABASES:
        raise ConfigInvalidError(
            f'XJOBS["READ_DATABASE"]={raw!r} is not an alias in DATABASES',
            hint="add an alias for the replica (its HOST and PORT, the jobs database's NAME) "
            f"or leave it None to read the jobs database; aliases: {', '.join(settings.DATABASES)}",
        )
    return raw


def _environment(raw: object) -> str | None:
    if raw is not None and (not isinstance(raw, str) or not raw.strip()):
        raise ConfigInvalidError(
            f'XJOBS["ENVIRONMENT"]={raw!r} must be a non-empty name or None',
            hint='e.g. "production"; read it from the environment: os.environ["APP_ENV"]',
        )
    return raw


def _connection_options(raw: object) -> dict[str, object]:
    if not isinstance(raw, dict) or not all(isinstance(key, str) for key in raw):
        raise ConfigInvalidError(
            f'XJOBS["CONNECTION_OPTIONS"]={raw!r} must map libpq option names to values',
            hint='e.g. {"keepalives_idle": 10, "tcp_user_timeout": 30000}; {} turns them off',
        )
    return dict(raw)


def _retention(raw: object) -> dict[str, float]:
    from ..states import FINISHED_STATES as finished

    if not isinstance(raw, dict) or any(state not in finished for state in raw):
        raise ConfigInvalidError(
            f'XJOBS["RETENTION"]={raw!r} must map finished states to durations',
            hint=f'states: {", ".join(finished)}; e.g. {{"done": "7d", "dead": "90d"}}',
        )
    kept = {}
    for state, value in raw.items():
        try:
            kept[state] = parse_duration(value, field=f'XJOBS["RETENTION"]["{state}"]')
        except XJobsError as error:
            raise ConfigInvalidError(error.message, hint=error.hint) from None
    return kept


def _history(raw: object) -> bool:
    if not isinstance(raw, bool):
        raise ConfigInvalidError(
            f'XJOBS["HISTORY"]={raw!r} must be True or False',
            hint="True moves finished jobs to x_job_history (docs/howto/data.md)",
        )
    return raw


def _history_grace(grace: float, merged: Mapping[str, object]) -> float:
    lease = claim_lease(merged["OUTBOX_CLAIM_LEASE"], error=ConfigInvalidError)
    if grace < max(MIN_HISTORY_GRACE, 2 * lease):
        raise ConfigInvalidError(
            f'XJOBS["HISTORY_GRACE"]={grace:g}s is shorter than a finished job must stay in x_jobs',
            hint=f"at least {MIN_HISTORY_GRACE:g}s and twice OUTBOX_CLAIM_LEASE ({2 * lease:g}s)",
        )
    return grace


def _concurrency(raw: object) -> int | dict[str, int]:
    try:
        return parse_concurrency(raw, field='XJOBS["CONCURRENCY"]')
    except XJobsError as problem:
        raise ConfigInvalidError(problem.message, hint=problem.hint) from None


def _limits(raw: object) -> Limits:
    try:
        return parse_limits(raw)
    except XJobsError as problem:
        raise ConfigInvalidError(f'XJOBS["LIMITS"]: {problem.message}', hint=problem.hint) from None


def claim_lease(value: Any, *, error: type[XJobsError] = InvariantError) -> float:
    """The outbox claim lease in seconds: a finite duration of at least one second
    (SPEC OUTBOX-14, SE-32: one normalisation, refused where it is given)."""
    try:
        seconds = parse_duration(value, field="claim_lease")
    except XJobsError as problem:
        raise error(problem.message, hint="the default is 30 seconds") from None
    if seconds < 1:
        raise error(
            f"claim_lease={value!r} is shorter than a second; a relay could not finish a batch",
            hint="the default is 30 seconds",
        )
    return seconds


def check_queue_name(queue: object, *, error: type[XJobsError]) -> str:
    if not isinstance(queue, str) or not QUEUE_NAME.match(queue):
        raise error(
            f"queue name {queue!r} is not valid",
            hint="use 1-64 letters, digits, '_', '.', ':' or '-', starting with a letter or digit",
        )
    return queue


@cache
def get() -> XJobsSettings:
    """The validated settings (cached; refreshed when a test overrides ``XJOBS``)."""
    return validate(getattr(settings, "XJOBS", {}))


@receiver(setting_changed)
def _refresh(setting: str, **kwargs: object) -> None:
    if setting in ("XJOBS", "DATABASES"):
        get.cache_clear()


def atomic_alias(settings: XJobsSettings) -> str | None:
    """The outbox database whose ``atomic()`` block the caller is in, if any (SPEC OUTBOX-20)."""
    for alias in settings.outbox_databases:
        if connections[alias].in_atomic_block:
            return alias
    return None
