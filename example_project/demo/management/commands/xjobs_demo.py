"""``manage.py xjobs_demo``: enqueue five jobs, run a worker until they settle, show the end."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import Error as DatabaseError
from django.test import Client
from django.utils import timezone

from demo.failure import one_line
from demo.jobs import charge_card, onboard_customer, send_welcome_email, sync_account
from django_xjobs import inspect_job, publish_event
from django_xjobs.errors import XJobsError
from django_xjobs.models import Job, JobStep
from django_xjobs.states import shown_attempt, shown_state
from django_xjobs.worker.worker import Worker

TERMINAL = {"done", "dead", "failed", "cancelled"}


class Command(BaseCommand):
    help = "Enqueue demo jobs, run a worker until they settle, and print what happened."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--timeout", type=float, default=60.0, help="give up after this many seconds"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self._demo(options["timeout"])
        except (XJobsError, DatabaseError) as error:  # e.g. the database is down or unmigrated
            raise CommandError(one_line(error)) from None

    def _demo(self, timeout: float) -> None:
        n = random.randint(1000, 9999)  # fresh keys, so a second demo run is not deduped
        results = [
            send_welcome_email.enqueue(user_id=n),
            sync_account.enqueue(account_id=n),
            charge_card.enqueue(order_id=n),
            onboard_customer.enqueue(customer_id=n),
        ]
        ids = [r.id for r in results]
        # the transactional outbox, through a real view: the order and its job commit together
        response = Client().post(
            "/orders/",
            {"email": f"c{n}@example.com", "total_cents": 1999},
            content_type="application/json",
        )
        placed = response.json()
        ids.append(
            Job.objects.get(
                name="demo.jobs.send_order_confirmation", input={"order_id": placed["order"]}
            ).id
        )
        self.stdout.write(
            f"POST /orders/ created order {placed['order']}; its job was staged in the same "
            f"transaction (staged={placed['staged']}) and published at commit"
        )
        self.stdout.write(f"enqueued {len(ids)} jobs; starting a worker (4 threads)\n")

        worker = Worker(queues=["default", "emails"], concurrency=4, poll_interval=0.1)
        thread = threading.Thread(target=worker.run, name="demo-worker")
        thread.start()
        seen: dict[Any, tuple[str, int]] = {}
        confirmed = False
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                rows = list(Job.objects.filter(id__in=ids))
                if not confirmed and self._waiting_for_confirmation(rows, ids[3]):
                    # what a webhook view would do when the customer clicks the link
                    publish_event("customer.confirmed", {"customer_id": n})
                    confirmed = True
                    self.stdout.write("  (a web request publishes customer.confirmed)")
                for row in rows:
                    now = (row.state, row.attempt)
                    if seen.get(row.id) != now:
                        seen[row.id] = now
                        self.stdout.write(self._progress(row))
                if len(rows) == len(ids) and all(r.state in TERMINAL for r in rows):
                    break
                time.sleep(0.1)  # a progress display, not a test: poll the table
        finally:
            worker.stop()
            thread.join()
        self.stdout.write("\n" + self._summary(ids))
        self.stdout.write(self._steps(ids[3]))

    def _waiting_for_confirmation(self, rows: list[Job], job_id: Any) -> bool:
        row = next((r for r in rows if r.id == job_id), None)
        return (
            row is not None
            and JobStep.objects.filter(
                run_id=row.run_id, name="email-confirmed", status="waiting"
            ).exists()
        )

    def _steps(self, job_id: Any) -> str:
        trace = inspect_job(job_id) or {"steps": []}
        lines = [
            "steps of demo.jobs.onboard_customer (stored in x_job_steps, replayed after a crash):"
        ]
        for step in trace["steps"]:
            took = f"{step['duration']:.2f}s" if step["duration"] is not None else "-"
            lines.append(f"  {step['name']:<18} {step['status']:<10} {took:>7}  {step['output']}")
        return "\n".join(lines) + "\n"

    def _progress(self, row: Job) -> str:
        # the words every other screen uses: a backoff shows delayed, a parked run its attempt
        state = shown_state(row.state, row.run_at, timezone.now())
        attempt = shown_attempt(row.state, row.attempt)
        text = f"  {row.name:<34} {state:<9} attempt {attempt} of {row.max_attempts}"
        if row.state in ("ready", "delayed") and row.last_error:
            text += f"  retrying after: {row.last_error}"
        if row.state == "suspended":
            text += "  parked until its sleep or event wait is over"
        return text

    def _summary(self, ids: list[Any]) -> str:
        rows = sorted(Job.objects.filter(id__in=ids), key=lambda r: ids.index(r.id))
        header = ("job", "state", "attempts", "stop reason", "result / last error")
        lines = [header]
        for row in rows:
            outcome = row.result if row.state == "done" else row.last_error
            lines.append(
                (
                    row.name,  # as the admin, `xjobs show` and the log lines spell it
                    row.state,
                    f"{row.attempt} of {row.max_attempts}",
                    row.stop_reason or "-",
                    str(outcome),
                )
            )
        widths = [max(len(str(line[i])) for line in lines) for i in range(4)]
        out = []
        for index, line in enumerate(lines):
            out.append(
                "  ".join(str(c).ljust(w) for c, w in zip(line[:4], widths, strict=True))
                + "  "
                + line[4]
            )
            if index == 0:
                out.append("  ".join("-" * w for w in widths) + "  " + "-" * 20)
        return "\n".join(out) + "\n"
