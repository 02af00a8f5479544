"""Issues 30 and 42, checked in a real browser: the OS's Chromium, driven by its chromedriver
through Selenium (scripts/provision installs both; nothing is downloaded). Each admin page a fleet
operator reads first loads with no console error at 1400 px with Django's sidebar open, shows the
fixture fleet's figures where they can be read without scrolling, and leaves a screenshot in
docs/_static/screens/ for docs/reference/admin.md."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from django_xjobs import operations
from django_xjobs.drivers import get_driver
from django_xjobs.drivers.contract import Complete, Finish, Presence, StepRecord, SuspendUntil
from tests.drivers.contract.support import claim, request

SCREENS = Path(__file__).resolve().parents[2] / "docs" / "_static" / "screens"
WIDTH, HEIGHT = 1400, 900

pytestmark = pytest.mark.process  # a browser process of its own


def _program(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError(f"none of {names} is installed: run bash scripts/provision")


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = _program("chromium", "chromium-browser")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={WIDTH},{HEIGHT}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(
        options=options, service=Service(_program("chromedriver", "chromium-driver"))
    )
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.fixture
def fleet(transactional_db) -> dict[str, Any]:
    """default: 3 done, 1 running with two steps; mail: 1 dead; a suspended waiter on default;
    one live worker watching default."""
    driver = get_driver()
    for key in ("a", "b", "c"):
        driver.jobs().enqueue(request(key=key))
    driver.jobs().enqueue(request(name="tests.jobs.terminal", key="dead", queue="mail"))
    held = {h.idempotency_key: h for h in claim(driver, queues=("default", "mail"))}
    driver.runs().complete([Complete(held[k].id, held[k].lease_token) for k in ("a", "b", "c")])
    dead = held["dead"]
    driver.runs().finish(
        Finish(
            dead.id,
            dead.lease_token,
            state="dead",
            stop_reason="attempts-exhausted",
            error="X_TERMINAL: the card was declined",
        )
    )
    driver.jobs().enqueue(request(name="tests.jobs.five_steps", key="running"))
    driver.jobs().enqueue(request(name="tests.jobs.waiter", key="parked"))
    both = {h.idempotency_key: h for h in claim(driver)}
    running, parked = both["running"], both["parked"]
    for position, name in enumerate(("load", "charge")):
        record = StepRecord(
            running.run_id, name, "completed", output={"ok": True}, position=position
        )
        driver.steps().put(record, job_id=running.id, lease_token=running.lease_token)
    wait = StepRecord(
        parked.run_id, "shipped", "waiting", event="order.shipped", correlation_key="7", position=0
    )
    driver.steps().put(wait, job_id=parked.id, lease_token=parked.lease_token)
    driver.runs().suspend(SuspendUntil(parked.id, parked.lease_token, delay=3600))
    driver.runs().renew_presence(Presence("w-1", "host-1", 42, ("default",), 1), ttl=600)
    return {"dead": dead.id, "running": running.id, "parked": parked.id}


@pytest.fixture
def signed_in(browser, live_server, fleet) -> webdriver.Chrome:
    user = User.objects.create_superuser("admin", "admin@example.com", "pw")
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.save()
    browser.get(f"{live_server.url}/admin/login/")
    browser.delete_all_cookies()
    browser.add_cookie(
        {"name": settings.SESSION_COOKIE_NAME, "value": session.session_key, "path": "/"}
    )
    browser.get_log("browser")  # start each test with an empty console
    return browser


def visit(browser: webdriver.Chrome, url: str, screen: str) -> str:
    browser.get(url)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    SCREENS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENS / f"{screen}.png"))
    return browser.find_element(By.ID, "content").text


def test_the_overview(signed_in, live_server, fleet):
    driver = get_driver()
    for minute in range(12):  # a backlog building on default, sampled once a minute
        driver.jobs().enqueue(request(key=f"backlog-{minute}-a"))
        driver.jobs().enqueue(request(key=f"backlog-{minute}-b"))
        assert driver.history().sample_depth() == 1
        driver._depth_store.shift(timedelta(minutes=1))
    driver.history().sample_depth()
    text = visit(
        signed_in, f"{live_server.url}/admin/django_xjobs/job/overview/?refresh=off", "overview"
    )
    queues = signed_in.find_element(By.ID, "xjobs-overview-queues")
    default = queues.find_element(By.CSS_SELECTOR, 'tr[data-queue="default"]')
    assert default.find_element(By.CLASS_NAME, "xjobs-done").text == "3"
    mail = queues.find_element(By.CSS_SELECTOR, 'tr[data-queue="mail"]')
    assert mail.find_element(By.CLASS_NAME, "xjobs-dead").text == "1"
    assert mail.find_element(By.CLASS_NAME, "xjobs-rate").text == "100%"
    assert len(signed_in.find_elements(By.CSS_SELECTOR, "svg.xjobs-chart")) >= 2
    assert "X_TERMINAL: the card was declined" in text and "1 alive" in text
    depth = signed_in.find_element(By.ID, "xjobs-overview-depth")
    default = depth.find_element(By.CSS_SELECTOR, 'tr[data-queue="default"]')
    assert default.find_element(By.CLASS_NAME, "xjobs-ready").text == "24"
    assert default.find_element(By.CLASS_NAME, "xjobs-running").text == "1"
    assert len(default.find_elements(By.CSS_SELECTOR, "svg.xjobs-chart rect[fill]")) >= 13
    # the page fits a 1366 px screen beside the admin's sidebar: no column cut off behind a
    # horizontal scroll
    wide, seen = signed_in.execute_script(
        "const e = document.documentElement; return [e.scrollWidth, e.clientWidth]"
    )
    assert wide <= seen, (wide, seen)


def on_screen(browser: webdriver.Chrome, element: Any) -> dict[str, float]:
    """Where ``element`` is, and the part of the page a reader sees without scrolling: the
    window, and the box of the nearest ancestor that scrolls sideways (the admin's result list)."""
    return browser.execute_script(
        """
        const box = arguments[0].getBoundingClientRect();
        let clip = {left: 0, right: window.innerWidth};
        for (let e = arguments[0].parentElement; e; e = e.parentElement) {
            const style = getComputedStyle(e);
            if (['auto', 'scroll', 'hidden'].includes(style.overflowX)) {
                const r = e.getBoundingClientRect();
                clip = {left: Math.max(clip.left, r.left), right: Math.min(clip.right, r.right)};
            }
        }
        return {left: box.left, right: box.right, top: box.top, bottom: box.bottom,
                clip_left: clip.left, clip_right: clip.right, height: window.innerHeight};
        """,
        element,
    )


def clear_of_the_title(browser: webdriver.Chrome) -> None:
    """The app's links do not run over the page's title (a dozen of them wrapped over it)."""
    title = browser.find_element(By.CSS_SELECTOR, "#content h1").rect
    tools = browser.find_element(By.CSS_SELECTOR, "#content .object-tools").rect
    edge = 1  # px: a layout's sub-pixel rounding (Django 6 puts the links 0.03 px into it)
    apart = (
        tools["y"] + edge >= title["y"] + title["height"]
        or title["y"] + edge >= tools["y"] + tools["height"]
        or tools["x"] + edge >= title["x"] + title["width"]
        or title["x"] + edge >= tools["x"] + tools["width"]
    )
    assert apart, (title, tools)


def test_the_job_list_at_1400_px_with_the_sidebar_open(signed_in, live_server, fleet):
    """Issue 42: the state, the stop reason and the last error of every row are on screen; the
    table was cut at "ATTEMP..." with the sidebar open."""
    visit(signed_in, f"{live_server.url}/admin/django_xjobs/job/", "jobs")
    sidebar = signed_in.find_element(By.ID, "nav-sidebar")
    assert sidebar.is_displayed() and sidebar.size["width"] > 200  # Django's sidebar is open
    # the cells under the columns an operator looks for, found by their headings
    cells = signed_in.execute_script(
        """
        const wanted = ['state', 'stop reason', 'last error'];
        const heads = [...document.querySelectorAll('#result_list thead th')];
        const columns = heads.map((th, i) => [th.innerText.trim().toLowerCase(), i])
            .filter(([text]) => wanted.includes(text)).map(([, i]) => i);
        const rows = [...document.querySelectorAll('#result_list tbody tr')];
        return rows.flatMap(row => columns.map(i => row.children[i]));
        """
    )
    assert len(cells) == 3 * 6
    for cell in cells:
        where = on_screen(signed_in, cell)
        assert where["clip_left"] <= where["left"] and where["right"] <= where["clip_right"], (
            cell.get_attribute("class"),
            where,
        )
    error = signed_in.find_element(By.CSS_SELECTOR, "#result_list .xjobs-error")
    assert error.text.startswith("X_TERMINAL")
    assert "attempts-exhausted" in signed_in.find_element(By.ID, "result_list").text
    clear_of_the_title(signed_in)
    badges = signed_in.find_elements(By.CSS_SELECTOR, "#result_list .xjobs-state")
    assert {b.text for b in badges} >= {"done", "dead", "running", "suspended"}


def test_a_dead_job(signed_in, live_server, fleet):
    """Issue 42: the state, stop reason, last error, attempt, why and next attempt in one header
    above the fold (the last error sat at y≈1,095 of a 3,300 px column)."""
    text = visit(
        signed_in, f"{live_server.url}/admin/django_xjobs/job/{fleet['dead']}/change/", "job-dead"
    )
    assert "it has ended: dead (attempts-exhausted)" in text
    assert "X_TERMINAL: the card was declined" in text
    for key in ("state", "stop-reason", "last-error", "attempt", "why", "next-attempt"):
        cell = signed_in.find_element(By.CSS_SELECTOR, f"#xjobs-job-header .xjobs-h-{key} dd")
        where = on_screen(signed_in, cell)
        assert cell.is_displayed() and where["bottom"] <= where["height"], (key, where)
    header = signed_in.find_element(By.ID, "xjobs-job-header").text
    assert "attempts-exhausted" in header and "X_TERMINAL" in header and "1 of 3" in header
    clear_of_the_title(signed_in)
    assert signed_in.find_element(By.CSS_SELECTOR, 'button[value="retry"]').is_displayed()
    assert "Change job" not in signed_in.title


def test_a_running_job_with_steps(signed_in, live_server, fleet):
    text = visit(
        signed_in,
        f"{live_server.url}/admin/django_xjobs/job/{fleet['running']}/change/",
        "job-running",
    )
    assert "it is running: attempt 1 of 3 on w1" in text
    assert "Why it stopped" not in text
    assert "load" in text and "charge" in text
    assert signed_in.find_element(By.CSS_SELECTOR, 'button[value="cancel"]').is_displayed()


def test_a_suspended_job(signed_in, live_server, fleet):
    text = visit(
        signed_in,
        f"{live_server.url}/admin/django_xjobs/job/{fleet['parked']}/change/",
        "job-suspended",
    )
    assert "waits for event 'order.shipped' with correlation key '7'" in text
    assert "next attempt" in text.lower()
    assert "in 59m" in text or "in 1h" in text


def test_run_now_from_a_delayed_jobs_page(signed_in, live_server, fleet):
    """Issue 42: a real press of Run now, through the page's form and its CSRF token."""
    later = get_driver().jobs().enqueue(request(key="later", delay=3600)).id
    signed_in.get(f"{live_server.url}/admin/django_xjobs/job/{later}/change/")
    state = signed_in.find_element(By.CSS_SELECTOR, "#xjobs-job-header .xjobs-state")
    assert state.text == "delayed"
    signed_in.find_element(By.CSS_SELECTOR, 'button[value="run-now"]').click()
    message = signed_in.find_element(By.CSS_SELECTOR, "ul.messagelist li").text
    assert message.startswith("Due now")
    state = signed_in.find_element(By.CSS_SELECTOR, "#xjobs-job-header .xjobs-state")
    assert state.text == "ready"
    assert signed_in.find_elements(By.CSS_SELECTOR, 'button[value="run-now"]') == []


def test_the_overview_is_one_click_from_the_admin_index(signed_in, live_server, fleet):
    signed_in.get(f"{live_server.url}/admin/")
    signed_in.find_element(By.LINK_TEXT, "Overview").click()
    assert signed_in.current_url.startswith(f"{live_server.url}/admin/django_xjobs/job/overview/")
    assert signed_in.find_elements(By.CSS_SELECTOR, "svg.xjobs-chart .xjobs-axis text")


def test_the_queues_page(signed_in, live_server, fleet):
    operations.pause_queue("mail", by="ops:alice")
    text = visit(signed_in, f"{live_server.url}/admin/django_xjobs/job/queues/", "queues")
    rows = signed_in.find_elements(By.CSS_SELECTOR, "#xjobs-queues tbody tr")
    assert [r.find_element(By.TAG_NAME, "th").text for r in rows][:2] == ["default", "mail"]
    assert "Queues" in signed_in.find_element(By.CLASS_NAME, "breadcrumbs").text
    assert "paused" in text
