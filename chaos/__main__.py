"""``python -m chaos [scenario ...]``: run the chaos scenarios, print one table.

Each scenario starts three ``manage.py xjobs_worker`` processes (four threads, visibility
timeout 3 s) on a scratch database, streams ledger-writing jobs, injects its fault, drains, and
counts from the ledger. Exit 1 if any scenario lost a job, completed one twice, left one stuck,
had a worker SIGTERM could not end, failed its own check (a killed worker's jobs done within the
recovery bound; a killed transaction's staged rows gone) or ran past 90 s.

Columns: jobs enqueued; done (row done and the body recorded its end); lost (neither done nor
live: no row, dead-lettered, failed); re-run (the body started more than once); twice (the body
recorded its end more than once); stuck (still live when the drain gave up); crashes (runs the
rows counted as crashes: a run that died alone in the child isolating it, a poison; none of
these faults makes one, since a run that only died with its worker is not counted);
recovery (the longest time from the fault's start until a job pending at that moment was done;
"-" while one is not); secs (the scenario's run time); logs (lines the workers logged); exits
(worker exit codes other than 0, "hung" when SIGTERM did not end it within 12 s).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    from chaos import NAMES as names

    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.split("\n")[0])
    parser.add_argument("only", nargs="*", metavar="scenario", help=", ".join(names))
    parser.add_argument(
        "--logs", default="build/chaos", help="where worker logs go (default build/chaos)"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only) - set(names))
    if unknown:
        parser.error(f"no scenario {', '.join(unknown)}; the scenarios are {', '.join(names)}")

    from chaos.server import Server

    server = Server.start()
    url = server.create_database()
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "chaos.settings"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.db import connection

    from chaos.scenarios import SCENARIOS, run

    chosen = [s for s in SCENARIOS if not args.only or s.name in args.only]

    results = []
    try:
        for scenario in chosen:
            print(f"chaos: {scenario.name} ...", flush=True)
            result = run(scenario, server, url, Path(args.logs))
            results.append(result)
            print(row(result), flush=True)
    finally:
        connection.close()
        server.drop_database(url)
        server.close()
    print()
    print(table(results))
    failed = [r.name for r in results if not r.ok]
    print(
        f"\nchaos: {len(results) - len(failed)}/{len(results)} scenarios clean"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


HEADER = (
    "scenario",
    "fault",
    "jobs",
    "done",
    "lost",
    "re-run",
    "twice",
    "stuck",
    "crashes",
    "recovery",
    "secs",
    "logs",
    "exits",
)


def row(result) -> str:
    return " | ".join(cells(result))


def cells(result) -> tuple[str, ...]:
    t = result.tally
    if result.skipped:
        return (result.name, f"skipped: {result.skipped}", *[""] * (len(HEADER) - 2))
    recovery = "-" if t.recovery is None else f"{t.recovery:.1f}s"
    return (
        result.name,
        result.fault,
        str(t.jobs),
        str(t.done),
        str(t.lost),
        str(t.rerun),
        str(t.twice),
        str(t.stuck),
        str(t.crashes),
        recovery,
        f"{result.seconds:.0f}",
        str(result.log_lines),
        " ".join(result.exits) or "0",
    )


def table(results) -> str:
    rows = [HEADER, *(cells(r) for r in results)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for result in results:
        for note in (*result.problems, *result.notes):
            lines.append(f"  {result.name}: {note}")
    return "\n".join(lines)


if __name__ == "__main__":
    began = time.monotonic()
    code = main(sys.argv[1:])
    print(f"chaos: {time.monotonic() - began:.0f}s in all")
    sys.exit(code)
