"""Screenshots of the admin, taken from the running example project in headless Chromium.

    .venv/bin/python scripts/screenshot_admin.py [--out docs]

What it does, in one process:

1. starts a throwaway embedded PostgreSQL (always: ``DATABASE_URL`` is ignored, so no real
   database gets demo rows or a superuser), migrates the example project and runs ``manage.py xjobs_demo``: a job done at once, one done after
   retries, a dead one (a declined card), the order confirmation published from the outbox and
   ``onboard_customer`` with its four durable steps;
2. enqueues a few more jobs that it does not run (ready, delayed), so the queue overview has
   depth to show, and creates a superuser with a random password;
3. starts ``example_project/manage.py runserver 127.0.0.1:<free port> --noreload`` on the same
   database, logs in through the admin's login form in headless Chromium and saves
   ``admin-jobs.png`` (the job list), ``admin-job-detail.png`` (onboard_customer's detail page
   with its step timeline) and ``admin-queues.png`` (the queue overview).

Needs, beside the package's own ``[test]`` extra: Debian's Chromium (``apt-get install
chromium``) and the Playwright Python package (``pip install playwright``), used only to drive
that Chromium: ``playwright install`` is never run, its browsers are not needed.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "example_project"
sys.path[:0] = [str(EXAMPLE), str(ROOT)]

WIDTH = 1680  # wide enough for every column of the job list beside its filters
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # run as root in a container
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where the PNGs go")
    parser.add_argument(
        "--all",
        action="store_true",
        help="also the cron schedules, the outbox and the fleet slots (not kept in docs/)",
    )
    args = parser.parse_args()

    from django_xjobs.testing.postgres import start_embedded

    os.environ["DATABASE_URL"] = start_embedded()  # it lives as long as this process does
    os.environ["DJANGO_SETTINGS_MODULE"] = "example_project.settings"

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    call_command("xjobs_demo")
    password = _seed()

    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(EXAMPLE / "manage.py"),
            "runserver",
            f"127.0.0.1:{port}",
            "--noreload",
        ],
        cwd=EXAMPLE,
        env=os.environ.copy(),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for(f"{base}/admin/login/", server)
        _shoot(base, password, args.out, every_page=args.all)
    finally:
        server.terminate()
        server.wait(timeout=10)


def _seed() -> str:
    """Jobs left queued for the overview, and the superuser the browser logs in as."""
    import random

    from demo.jobs import send_daily_digest, send_welcome_email, sync_account
    from django.contrib.auth.models import User

    n = random.randint(10_000, 99_999)
    for user_id in range(n, n + 3):
        send_welcome_email.enqueue(user_id=user_id)
    sync_account.using(delay="1h").enqueue(account_id=n)
    send_daily_digest.using(delay="6h").enqueue(day="2026-01-02")
    password = secrets.token_urlsafe(16)
    User.objects.create_superuser("admin", "admin@example.com", password)
    return password


def _shoot(base: str, password: str, out: Path, every_page: bool) -> None:
    from playwright.sync_api import sync_playwright

    from django_xjobs.models import Job

    onboard = Job.objects.filter(name="demo.jobs.onboard_customer", state="done").first()
    if onboard is None:
        raise SystemExit("the demo left no finished onboard_customer job to show")
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": WIDTH, "height": 860})
        # the admin's app sidebar, folded (as its « button does), leaves the columns the room
        page.add_init_script("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
        page.goto(f"{base}/admin/login/?next=/admin/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", password)
        page.click("input[type=submit]")
        page.wait_for_url(f"{base}/admin/")

        # (file, page, what must be on it, the element the picture ends with or None)
        shots = [
            ("admin-jobs.png", "/admin/django_xjobs/job/", "#result_list", None),
            (
                "admin-job-detail.png",
                f"/admin/django_xjobs/job/{onboard.pk}/change/",
                ".field-step_timeline table",
                ".field-run_id",  # down to the data: the timing fieldsets follow
            ),
            ("admin-queues.png", "/admin/django_xjobs/job/queues/", "#xjobs-queues", None),
        ]
        if every_page:
            shots += [
                ("admin-crons.png", "/admin/django_xjobs/job/crons/", "#xjobs-crons", None),
                ("admin-outbox.png", "/admin/django_xjobs/outboxentry/", "#result_list", None),
                ("admin-slots.png", "/admin/django_xjobs/joblease/", "#changelist", None),
            ]
        for filename, path, expect, until in shots:
            response = page.goto(base + path)
            if response is None or response.status != 200:
                raise SystemExit(f"{path}: HTTP {response and response.status}")
            page.wait_for_selector(expect)  # the content, not an error or login page
            if until is None:
                page.screenshot(path=str(out / filename))
            else:
                box = page.locator(until).bounding_box()
                assert box is not None
                bottom = box["y"] + box["height"] + 8
                page.screenshot(
                    path=str(out / filename),
                    full_page=True,
                    clip={"x": 0, "y": 0, "width": WIDTH, "height": bottom},
                )
            print(f"{out / filename}: {path}", flush=True)
        browser.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(url: str, server: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"runserver exited with {server.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"runserver did not answer {url} within {timeout:.0f}s")


if __name__ == "__main__":
    main()
