"""The faults, one function each: it injects the fault into a running lab and sets
``lab.fault_at`` to the moment it began. ``run`` wraps each in the same frame: three workers, a
warm stream, the fault, five more seconds of stream, a drain, a SIGTERM, the tally.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django_xjobs.models import Job, OutboxEntry
from django_xjobs.models import Worker as WorkerRow
from tests.models import Ledger
from tests.support.process import ManageProcess, wait_for, worker_env
from tests.support.proxy import SilentProxy

from . import NAMES
from . import fleet as fl
from .server import Server

BUDGET = float(os.environ.get("CHAOS_BUDGET", "90"))  # seconds per scenario, start to tally
AFTER = 5.0  # seconds the stream goes on after the fault
OUTAGE = float(os.environ.get("CHAOS_OUTAGE", "8"))  # seconds the server is down


@dataclass
class Lab:
    server: Server
    url: str  # the scratch database, direct
    prefix: str
    fleet: fl.Fleet
    fault_at: float = 0.0
    fault: str = ""  # what was done, for the table
    enqueued: list[str] = field(default_factory=list)  # tokens a producer committed
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # scenario checks that failed
    closers: list[Callable[[], None]] = field(default_factory=list)
    proxy: SilentProxy | None = None  # between the proxied workers and the database
    checks: list[Callable[[], None]] = field(default_factory=list)  # run after the drain


@dataclass(frozen=True)
class Scenario:
    name: str
    inject: Callable[[Lab], None]
    needs_control: bool = False  # stops or restarts the server: embedded only
    stream: bool = True  # False: the scenario brings its own producer
    proxied: int = 0  # how many of the workers reach the database through a SilentProxy
    fleet: bool = True  # False: the scenario starts its own workers


@dataclass(frozen=True)
class Result:
    name: str
    fault: str = ""
    tally: fl.Tally | None = None
    exits: tuple[str, ...] = ()
    log_lines: int = 0
    seconds: float = 0.0
    notes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    skipped: str = ""

    @property
    def ok(self) -> bool:
        t = self.tally
        if self.skipped:
            return True
        return (
            t is not None
            and t.lost == 0
            and t.twice == 0
            and t.stuck == 0
            and not self.problems
            and not any("hung" in exit_ for exit_ in self.exits)  # SIGTERM must end a worker
            and self.seconds <= BUDGET
        )


# --- the faults -------------------------------------------------------------------------------


def sigkill(lab: Lab) -> None:
    """SIGKILL the busiest worker three times, 4 s apart; a supervisor would start a new one."""
    lab.fault = "SIGKILL x3"
    orphans: list[tuple[str, float]] = []  # (job id, when its worker was killed)
    for i in range(3):
        victim = lab.fleet.busiest(lab.prefix)
        held = _running_ids(lab.prefix, victim.name)
        killed_at = time.time()
        lab.fault_at = lab.fault_at or killed_at
        lab.fleet.kill(victim)
        orphans.extend((job_id, killed_at) for job_id in held)
        lab.fleet.start(1)
        if i < 2:
            time.sleep(4)
    lab.checks.append(lambda: _orphans_recovered(lab, orphans))


def _orphans_recovered(lab: Lab, orphans: list[tuple[str, float]]) -> None:
    """Issue 12 item 3: a killed worker's jobs are done within the visibility timeout + the
    start of the child process each runs alone in (issue 39 item 2) + one poll, plus its own
    run (and slack for a shared machine), from the last kill that hit each: a suspect runs at
    once, in a child of the next worker, which the next kill of the busiest worker may take
    down with it."""
    bound = fl.VISIBILITY + ISOLATION + 0.2 + fl.HOLD + 2.0
    last: dict[str, float] = {}
    for job_id, at in orphans:
        last[job_id] = max(at, last.get(job_id, at))
    done = dict(
        fl.retrying(
            lambda: list(
                Job.objects.filter(id__in=[i for i, _ in orphans], state="done").values_list(
                    "id", "updated_at"
                )
            )
        )
    )
    waits = [
        done[uuid.UUID(str(i))].timestamp() - at if uuid.UUID(str(i)) in done else float("inf")
        for i, at in last.items()
    ]
    worst = max(waits, default=0.0)
    again = len(orphans) - len(last)
    lab.notes.append(
        f"{len(last)} jobs of killed workers ({again} hit by a second kill), done at worst "
        f"{worst:.1f}s after the last kill that hit them"
    )
    if worst > bound:
        lab.problems.append(f"a killed worker's job took {worst:.1f}s (bound {bound:.1f}s)")


#: a suspect's child process starting (a fresh interpreter setting Django up), on a busy host
ISOLATION = 3.0


def _running_ids(prefix: str, worker: str) -> list[str]:
    return fl.retrying(
        lambda: [
            str(i)
            for i in Job.objects.filter(
                idempotency_key__startswith=f"chaos:{prefix}", state="running", claimed_by=worker
            ).values_list("id", flat=True)
        ]
    )


def sigstop(lab: Lab) -> None:
    """SIGSTOP the busiest worker for twice the visibility timeout, then SIGCONT."""
    victim = lab.fleet.busiest(lab.prefix)
    lab.fault = f"SIGSTOP {2 * fl.VISIBILITY:.0f}s"
    lab.fault_at = time.time()
    victim.send(signal.SIGSTOP)
    try:
        time.sleep(2 * fl.VISIBILITY)
    finally:
        victim.send(signal.SIGCONT)


def terminate(lab: Lab) -> None:
    """pg_terminate_backend of every other connection to the database, three times, 2 s apart."""
    lab.fault = "terminate x3"
    lab.fault_at = time.time()
    ended = 0
    for i in range(3):
        ended += fl.retrying(_terminate_all)
        if i < 2:
            time.sleep(2)
    lab.notes.append(f"{ended} backends terminated")


def _terminate_all(keep: tuple[int, ...] = ()) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend' AND NOT (pid = ANY(%s))",
            [list(keep)],
        )
        return int(cursor.fetchone()[0])


def restart(lab: Lab) -> None:
    """``pg_ctl restart -m immediate``: every backend killed, crash recovery, back up."""
    lab.fault = "restart -m immediate"
    lab.fault_at = time.time()
    lab.server.restart(mode="immediate")
    lab.notes.append(f"server back after {time.time() - lab.fault_at:.1f}s")


def outage(lab: Lab) -> None:
    """The server stopped for 8 s, then started again."""
    lab.fault = f"server down {OUTAGE:.0f}s"
    cut_short = _running_tokens(lab.prefix)
    lab.fault_at = time.time()
    lab.server.stop()
    try:
        time.sleep(OUTAGE)
    finally:
        lab.server.resume()
    back_at = time.time()
    lab.notes.append(f"server back after {back_at - lab.fault_at:.1f}s")
    lab.checks.append(lambda: _cut_short_restarted(lab, cut_short, back_at))


#: the outage-drain scenario's sizes (issue 39 item 1): a backlog of three kinds of handler
#: that write to the jobs database, the server stopped -m immediate into its drain
DRAIN_JOBS = int(os.environ.get("CHAOS_DRAIN_JOBS", "1500"))
DRAIN_INTO = float(os.environ.get("CHAOS_DRAIN_INTO", "8"))  # seconds into the drain
DRAIN_DOWN = float(os.environ.get("CHAOS_DRAIN_DOWN", "20"))  # seconds the server is down
DRAIN_SIZE = fl.Size(threads=8, visibility=5.0, poll=0.5)


def outage_drain(lab: Lab) -> None:
    """Issue 39 item 1, as it was measured: three workers of eight threads, a 5 s lease, a
    backlog of no-ops, bodies that sleep 0.2-2 s ignoring their signal and three-step jobs,
    each writing the ledger at its start and its end. DRAIN_INTO s into the drain the server
    is stopped ``-m immediate`` for DRAIN_DOWN s; every run it cut short starts again within
    two visibility timeouts of the server being back."""
    from chaos.jobs import noop, sleepy, stepped

    kinds = (noop, sleepy, stepped)
    tokens = [f"{lab.prefix}{i}" for i in range(DRAIN_JOBS)]
    by_kind: dict[object, list[dict[str, object]]] = {kind: [] for kind in kinds}
    for i, token in enumerate(tokens):
        by_kind[kinds[i % 3]].append({"token": token})
    lab.fleet.start(fl.WORKERS, size=DRAIN_SIZE)
    wait_for(
        lambda: fl.retrying(lambda: WorkerRow.objects.count()) >= fl.WORKERS,
        timeout=60,
        what="every worker to be present",
    )
    for kind, inputs in by_kind.items():
        for chunk in range(0, len(inputs), 250):
            kind.enqueue_many(inputs[chunk : chunk + 250])  # type: ignore[attr-defined]
    lab.enqueued.extend(tokens)
    began = time.time()
    time.sleep(max(0.0, DRAIN_INTO - (time.time() - began)))
    cut_short = _running_tokens(lab.prefix)
    lab.fault = f"-m immediate {DRAIN_DOWN:.0f}s, {DRAIN_JOBS} jobs"
    lab.fault_at = time.time()
    lab.server.stop(mode="immediate")
    try:
        time.sleep(DRAIN_DOWN)
    finally:
        lab.server.resume()
    back_at = time.time()
    lab.notes.append(f"server back after {back_at - lab.fault_at:.1f}s")
    lab.checks.append(lambda: _cut_short_restarted(lab, cut_short, back_at, DRAIN_SIZE.visibility))


def _running_tokens(prefix: str) -> list[str]:
    keys = fl.retrying(
        lambda: list(
            Job.objects.filter(
                idempotency_key__startswith=f"chaos:{prefix}", state="running"
            ).values_list("idempotency_key", flat=True)
        )
    )
    return [key.removeprefix("chaos:") for key in keys]


def _cut_short_restarted(
    lab: Lab, tokens: list[str], back_at: float, visibility: float = fl.VISIBILITY
) -> None:
    """Issue 25 item 1: the runs the outage cut short start again within two visibility
    timeouts of the server being back (their worker hands them back once it answers)."""
    if not tokens:
        return
    marks = fl.retrying(
        lambda: list(Ledger.objects.filter(token__in=tokens).values_list("token", "phase", "at"))
    )
    # a run that had finished its work lands its result once the server is back: not cut short
    finished = {t for t, phase, at in marks if phase == "done" and at.timestamp() <= back_at}
    cut = [t for t in tokens if t not in finished]
    if not cut:
        return
    # a start written after the fault began was written once the server answered again (a run
    # handed back may start a moment before the server's own start command returns)
    waits = sorted(
        max(
            0.0,
            min(
                (
                    at.timestamp() - back_at
                    for t, phase, at in marks
                    if t == token and phase == "start" and at.timestamp() > lab.fault_at
                ),
                default=float("inf"),
            ),
        )
        for token in cut
    )
    tokens = cut
    p50, worst = waits[len(waits) // 2], waits[-1]
    bound = 2 * visibility
    lab.notes.append(
        f"{len(tokens)} runs cut short started again {p50:.1f}s (p50), {worst:.1f}s (max) "
        f"after the server was back (bound {bound:.0f}s)"
    )
    if worst > bound:
        lab.problems.append(
            f"a cut-short run started again {worst:.1f}s after (bound {bound:.0f}s)"
        )


LONG = float(os.environ.get("CHAOS_LONG", "20"))  # seconds the long runs hold their thread
SUSPECT_SIZE = fl.Size(threads=5)


def deploy(lab: Lab) -> None:
    """Issue 39 item 2, scaled down: a worker is sent SIGTERM while a long run holds past its
    --shutdown-timeout (a routine deploy); the next worker runs another long job when the first
    comes back, and a stream of short jobs is measured meanwhile."""
    _beside_a_long_run(lab, signal.SIGTERM)


def suspect(lab: Lab) -> None:
    """The same with SIGKILL: the long run comes back a real suspect (its worker died)."""
    _beside_a_long_run(lab, signal.SIGKILL)


def _beside_a_long_run(lab: Lab, sig: signal.Signals) -> None:
    from chaos.jobs import long

    lab.fault = f"{sig.name} mid long run, {SUSPECT_SIZE.threads} threads"
    [first] = lab.fleet.start(1, size=SUSPECT_SIZE, extra=("--shutdown-timeout=2s",))
    wait_for(lambda: first.saw("xjobs.worker.started"), timeout=60, what="the first worker")
    comes_back, beside = f"long-{lab.prefix}back", f"long-{lab.prefix}beside"
    long.enqueue(token=comes_back, hold=LONG)
    wait_for(lambda: _marked(comes_back, "start"), timeout=60, what="the long run to start")
    first.send(sig)
    first.proc.wait(timeout=30)
    [second] = lab.fleet.start(1, size=SUSPECT_SIZE)
    wait_for(lambda: second.saw("xjobs.worker.started"), timeout=60, what="the next worker")
    long.enqueue(token=beside, hold=LONG * 0.7)
    wait_for(lambda: _marked(beside, "start"), timeout=60, what="the other long run")
    lab.fault_at = time.time()
    stream = fl.Stream(lab.prefix, rate=4.0)
    stream.start()
    try:
        wait_for(lambda: _marked(comes_back, "start", 2), timeout=120, what="the run back")
        time.sleep(AFTER)  # the stream goes on while the run that came back holds
    finally:
        stream.stop()
    lab.enqueued.extend(stream.tokens)
    # both long runs end before the frame drains and stops the worker: a clean exit
    wait_for(lambda: _marked(comes_back, "done"), timeout=120, what="the run back to end")
    wait_for(lambda: _marked(beside, "done"), timeout=120, what="the other long run to end")
    lab.notes.append(f"{first.name} exited {first.proc.returncode}")
    lab.closers.append(lambda: _stall(lab, second, comes_back))


def _marked(token: str, phase: str, count: int = 1) -> bool:
    return fl.retrying(lambda: Ledger.objects.filter(token=token, phase=phase).count() >= count)


def _stall(lab: Lab, worker: fl.Worker, comes_back: str) -> None:
    """How long the stream's jobs waited from their enqueue to their end while the run that
    came back was due or held (issue 39 item 2: a suspect must not stop its worker claiming)."""
    rows = fl.retrying(
        lambda: list(
            Job.objects.filter(
                idempotency_key__startswith=f"chaos:{lab.prefix}", state="done"
            ).values_list("created_at", "updated_at")
        )
    )
    waits = sorted((done - made).total_seconds() for made, done in rows)
    isolated = sum(1 for line in worker.err if "xjobs.worker.isolating" in line)
    if waits:
        lab.notes.append(
            f"stream jobs waited {waits[len(waits) // 2]:.1f}s (p50), {waits[-1]:.1f}s (max) "
            f"from enqueue to done; the run that came back was isolated {isolated} time(s)"
        )
        if waits[-1] > LONG / 2:
            lab.problems.append(f"a stream job waited {waits[-1]:.1f}s: the worker stalled")


def silent_drop(lab: Lab) -> None:
    """Worker 1 reaches the database through a proxy; every connection it has open goes dark:
    no byte forwarded, nothing closed. New connections go through (a dead NAT entry)."""
    assert lab.proxy is not None
    proxied = lab.fleet.workers[0].name
    # aim at a moment it holds a run: its settle is then on a connection that went dark
    wait_for(lambda: _running_on(lab.prefix, proxied), timeout=20, what=f"a run on {proxied}")
    lab.fault_at = time.time()
    lab.proxy.freeze()
    lab.fault = "w1 conns go silent"


def exhaustion(lab: Lab) -> None:
    """Hold every free connection slot of the server, end the workers' backends so they must
    reconnect into a full server, keep it full for 8 s, then let go."""
    import psycopg

    held: list[psycopg.Connection] = []

    def fill() -> None:
        while True:
            try:
                held.append(psycopg.connect(lab.url, autocommit=True, connect_timeout=5))
            except psycopg.OperationalError:
                return  # too many clients: full

    lab.fault_at = time.time()
    try:
        fill()
        keep = tuple(c.info.backend_pid for c in held)
        ended = fl.retrying(lambda: _terminate_all(keep))
        deadline = time.monotonic() + OUTAGE
        while time.monotonic() < deadline:  # take back each slot a worker's backend freed
            fill()
            time.sleep(0.2)
        lab.fault = f"{len(held)} conns held {OUTAGE:.0f}s"
        lab.notes.append(f"{ended} worker backends ended into a full server")
    finally:
        for conn in held:
            conn.close()


STARVED_MAX = 20  # max_connections while starved
STARVE = float(os.environ.get("CHAOS_STARVE", "20"))  # seconds the server stays that small
STARVED_JOBS = int(os.environ.get("CHAOS_STARVED_JOBS", "600"))  # the backlog it meets


def starved(lab: Lab) -> None:
    """The server restarted with max_connections=20 and a backlog enqueued: three workers need
    more connections than that, so their job threads are refused. STARVE s later it is restarted
    with its usual limit. Issue 25 item 2: the workers claim only what can get a connection,
    so hand-backs (sheds, and runs handed back for a refused connection) stay under a tenth of
    their claims."""
    from django.db import connection

    from chaos.jobs import stream
    from chaos.server import MAX_CONNECTIONS

    lab.fault = f"max_connections={STARVED_MAX} {STARVE:.0f}s, {STARVED_JOBS} jobs"
    lab.fault_at = time.time()
    _admin(lab, f"ALTER SYSTEM SET max_connections = {STARVED_MAX}")
    lab.server.restart(mode="fast")
    tokens = [f"{lab.prefix}b{i}" for i in range(STARVED_JOBS)]
    for chunk in range(0, len(tokens), 100):
        inputs = [{"token": t, "hold": fl.HOLD} for t in tokens[chunk : chunk + 100]]
        deadline = time.monotonic() + 30
        while True:  # a full server refuses the harness too, now and then (idempotent: again)
            try:
                stream.enqueue_many(inputs)
                break
            except Exception:
                connection.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    lab.enqueued.extend(tokens)
    time.sleep(max(0.0, STARVE - (time.time() - lab.fault_at)))
    _admin(lab, f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS}")
    lab.server.restart(mode="fast")
    lab.notes.append(f"server at its usual limit after {time.time() - lab.fault_at:.1f}s")
    lab.closers.append(lambda: _claims_and_sheds(lab))


def _admin(lab: Lab, statement: str) -> None:
    """``statement`` as the superuser, waiting for a free slot in a full server."""
    import psycopg

    deadline = time.monotonic() + 30
    while True:
        try:
            lab.server.sql(statement)
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _claims_and_sheds(lab: Lab) -> None:
    """From each worker's last line (``stopped: completed N, retried M, shed K, ...``): every
    run it claimed, and those it handed back (a stream job fails only for its connection)."""
    import re

    claims = sheds = 0
    for worker in lab.fleet.retired:
        for line in worker.out:
            if "stopped:" in line:
                counts = {k: int(n) for k, n in re.findall(r"(\w+) (\d+)", line.split(":", 1)[1])}
                claims += sum(counts.values())
                sheds += counts.get("retried", 0) + counts.get("shed", 0)
    share = sheds / claims if claims else 0.0
    lab.notes.append(f"{claims} claims, {sheds} handed back ({share:.1%})")
    if share > 0.1:
        lab.problems.append(f"hand-backs {share:.1%} of claims (bound 10%)")


HUNG = int(os.environ.get("CHAOS_HUNG", "20"))  # jobs that ignore their 3 s timeout
NOOPS = int(os.environ.get("CHAOS_NOOPS", "400"))  # no-ops enqueued behind them


def hung(lab: Lab) -> None:
    """Issue 25 item 3: one worker as the README runs it (defaults, no ``--processes``), 20 jobs
    that ignore their 3 s timeout ahead of 400 no-ops. Hung bodies keep their threads; every
    no-op must still finish (the worker starts afresh once they have held its threads for
    ``ABANDONED_RECYCLE_AFTER``). Recovery: from the no-ops' enqueue to the last one done."""
    from chaos.jobs import hangs, stream

    lab.fault = f"{HUNG} hung + {NOOPS} no-ops, default worker"
    hangs.enqueue_many([{"token": f"hung-{lab.prefix}{i}"} for i in range(HUNG)])
    worker = lab.fleet.start_default()
    wait_for(lambda: worker.saw("xjobs.worker.started"), timeout=60, what="the worker")
    lab.fault_at = time.time()
    tokens = [f"{lab.prefix}n{i}" for i in range(NOOPS)]
    stream.enqueue_many([{"token": t, "hold": 0.0} for t in tokens])
    lab.enqueued.extend(tokens)

    def recycled() -> None:
        restarts = sum(
            1 for w in lab.fleet.retired for line in w.err if "xjobs.worker.restarting" in line
        )
        lab.notes.append(f"the worker started afresh {restarts} times")
        done = fl.retrying(
            lambda: list(
                Job.objects.filter(
                    idempotency_key__startswith=f"chaos:{lab.prefix}", state="done"
                ).values_list("updated_at", flat=True)
            )
        )
        last = max((at.timestamp() for at in done), default=lab.fault_at) - lab.fault_at
        lab.notes.append(f"{len(done)} of {NOOPS} no-ops done, the last {last:.1f}s after enqueue")

    lab.closers.append(recycled)


def producer_killed(lab: Lab) -> None:
    """A producer commits batches of five enqueues through the outbox; it is SIGKILLed twice
    while a batch is staged and uncommitted (and the relay once, mid-stream). The staged rows of
    a killed transaction must vanish; every committed one must become exactly one job."""
    relay = _relay(lab)
    killed: list[str] = []
    lab.fault = "producer SIGKILL x2, relay x1"
    for round_ in range(2):
        prefix = f"{lab.prefix}{round_}-"
        producer = Producer(lab, prefix)
        wait_for(lambda p=producer: p.opened(4), timeout=30, what="the producer's fifth batch")
        if round_ == 0:
            lab.fault_at = time.time()
        producer.proc.kill()
        producer.proc.wait()
        producer._join()
        open_batch = producer.last_open()
        killed.append(f"{prefix}{open_batch}-")
        lab.enqueued.extend(producer.committed_tokens())
        if round_ == 0:
            relay.proc.kill()
            relay.proc.wait()
            relay = _relay(lab)
    wait_for(lambda: _outbox_empty(lab.prefix), timeout=30, what="the relay to publish all")
    leaked = sum(
        fl.retrying(
            lambda k=k: (
                Job.objects.filter(idempotency_key__startswith=f"chaos:{k}").count()
                + OutboxEntry.objects.filter(idempotency_key__startswith=f"chaos:{k}").count()
            )
        )
        for k in killed
    )
    lab.notes.append(f"killed transactions left {leaked} rows (jobs or outbox)")
    if leaked:
        lab.problems.append(f"{leaked} rows of a killed transaction survived")


class Producer(ManageProcess):
    """``python -m chaos.producer``: prints "open N" inside batch N's transaction (which stays
    open 1 s), "committed N" after its commit."""

    def __init__(self, lab: Lab, prefix: str) -> None:
        self.prefix = prefix
        env = {**worker_env(lab.url), "DJANGO_SETTINGS_MODULE": "chaos.settings"}
        self.start([sys.executable, "-m", "chaos.producer", prefix], env)

    def opened(self, batch: int) -> bool:
        return f"open {batch}\n" in self.out

    def last_open(self) -> int:
        return max(int(line.split()[1]) for line in self.out if line.startswith("open "))

    def committed_tokens(self) -> list[str]:
        batches = [int(line.split()[1]) for line in self.out if line.startswith("committed ")]
        return [f"{self.prefix}{b}-{i}" for b in batches for i in range(5)]


def _relay(lab: Lab) -> ManageProcess:
    relay = ManageProcess("xjobs_relay", fl.SETTINGS, "--interval=100ms", env=worker_env(lab.url))
    lab.closers.append(relay.kill)
    return relay


def _running_on(prefix: str, worker: str) -> bool:
    return fl.retrying(
        lambda: Job.objects.filter(
            idempotency_key__startswith=f"chaos:{prefix}", state="running", claimed_by=worker
        ).exists()
    )


def _outbox_empty(prefix: str) -> bool:
    return not fl.retrying(
        lambda: OutboxEntry.objects.filter(
            idempotency_key__startswith=f"chaos:{prefix}", published_at__isnull=True
        ).exists()
    )


SCENARIOS = [
    Scenario("sigkill", sigkill),
    Scenario("sigstop", sigstop),
    Scenario("terminate", terminate),
    Scenario("restart", restart, needs_control=True),
    Scenario("outage", outage, needs_control=True),
    Scenario("outage-drain", outage_drain, needs_control=True, stream=False, fleet=False),
    Scenario("deploy", deploy, stream=False, fleet=False),
    Scenario("suspect", suspect, stream=False, fleet=False),
    Scenario("silent-drop", silent_drop, proxied=1),
    Scenario("exhaustion", exhaustion),
    Scenario("starved", starved, needs_control=True),
    Scenario("hung", hung, stream=False, fleet=False),
    Scenario("producer", producer_killed, stream=False),
]
assert tuple(s.name for s in SCENARIOS) == NAMES

# --- the frame --------------------------------------------------------------------------------


def run(scenario: Scenario, server: Server, url: str, logs: Path) -> Result:
    if scenario.needs_control and not server.controllable:
        return Result(scenario.name, skipped="needs the embedded server (DATABASE_URL is set)")
    began = time.monotonic()
    prefix = f"{scenario.name}-{uuid.uuid4().hex[:6]}-"
    lab = Lab(server=server, url=url, prefix=prefix, fleet=fl.Fleet(scenario.name, url))
    stream = fl.Stream(prefix) if scenario.stream else None
    drained = False
    try:
        if scenario.proxied:
            lab.proxy = SilentProxy(url)
            lab.closers.append(lab.proxy.close)
            lab.fleet.start(scenario.proxied, url=lab.proxy.url)
        if scenario.fleet:
            lab.fleet.start(fl.WORKERS - scenario.proxied)
            # every worker present before the fault: one still starting when the server goes
            # away refuses to start at all (its preflight), and the scenario would run one short
            wait_for(
                lambda: fl.retrying(lambda: WorkerRow.objects.count()) >= fl.WORKERS,
                timeout=60,
                what="every worker to be present",
            )
        if stream is not None:
            stream.start()
            wait_for(lambda: _done(prefix) >= 8, timeout=60, what="the stream to warm up")
        scenario.inject(lab)
        if stream is not None:
            time.sleep(AFTER)  # the stream goes on after the fault: recovery under load
            stream.stop()
            lab.enqueued.extend(stream.tokens)
            if stream.failures:
                lab.notes.append(f"{stream.failures} enqueues failed")
        drained = fl.drain(prefix, timeout=max(5.0, BUDGET - 25 - (time.monotonic() - began)))
        if not drained:
            lab.notes.append("drain gave up")
        tally = fl.tally(prefix, lab.enqueued, lab.fault_at)
        for check in lab.checks:
            check()
    finally:
        if stream is not None and stream.is_alive():
            stream.stop()
        lab.fleet.stop()
        for close in reversed(lab.closers):
            close()
        lab.fleet.save_logs(logs / scenario.name)
    return Result(
        scenario.name,
        fault=lab.fault,
        tally=tally,
        exits=tuple(e for e in lab.fleet.exits if e),
        log_lines=lab.fleet.log_lines(),
        seconds=time.monotonic() - began,
        notes=(*lab.notes, *tally.lost_reasons, *tally.stuck_holders),
        problems=tuple(lab.problems),
    )


def _done(prefix: str) -> int:
    return fl.retrying(
        lambda: Job.objects.filter(
            idempotency_key__startswith=f"chaos:{prefix}", state="done"
        ).count()
    )
