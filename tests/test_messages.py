"""Logs and messages a person reads: who wrote a line, what was refused and how to fix it."""

from __future__ import annotations

import ast
import logging
import re
import threading
from pathlib import Path

import pytest

import django_xjobs
from django_xjobs import job
from django_xjobs.clock import FrozenClock
from django_xjobs.drivers.memory import MemoryDriver
from django_xjobs.drivers.memory.scheduler import MemorySchedulerStore
from django_xjobs.errors import InputInvalidError, JobDefinitionError
from django_xjobs.scheduler.role import Scheduler
from django_xjobs.testing import memory_driver, run_until_idle
from tests import jobs


@job(idempotency_key="says:{n}", name="tests.messages.says_hello")
def says_hello(ctx, n: int):
    ctx.logger.info("hello %s", n)


class Order:
    pk = 7


def test_ctx_logger_lines_carry_the_job_name_and_id_in_the_default_format(caplog):
    caplog.set_level(logging.INFO, logger="django_xjobs.jobs")
    with memory_driver():
        job_id = says_hello.enqueue(n=3).id
        [run] = run_until_idle()
    assert run.outcome == "completed"
    [record] = [
        r for r in caplog.records if r.name == "django_xjobs.jobs.tests.messages.says_hello"
    ]
    line = logging.Formatter().format(record)  # "%(message)s": what a default handler prints
    assert line == f"[tests.messages.says_hello {job_id}] hello 3"
    assert (record.job, record.job_id, record.attempt) == (
        "tests.messages.says_hello",
        str(job_id),
        1,
    )


def test_a_stopped_scheduler_logs_stopped_like_the_worker_and_relay(caplog):
    caplog.set_level(logging.INFO, logger="django_xjobs")
    clock = FrozenClock()
    scheduler = Scheduler(
        driver=MemoryDriver(clock),
        store=MemorySchedulerStore(clock),
        cron_names=[],
        clock=clock,
        tick_interval=0.05,
    )
    thread = threading.Thread(target=scheduler.run)
    thread.start()
    scheduler.stop()
    thread.join(10)
    assert not thread.is_alive()
    stopped = [r for r in caplog.records if getattr(r, "event", "") == "xjobs.scheduler.stopped"]
    assert [r.fields["holder"] for r in stopped] == [scheduler.holder]


def test_an_object_input_is_named_with_its_article_after_a_colon(db):
    with pytest.raises(InputInvalidError) as caught:
        jobs.ok.enqueue(n=Order())
    message = str(caught.value)
    assert "job 'tests.jobs.ok': inputs.n: an Order is not JSON" in message, message
    assert "pass the primary key" in message


def test_an_int_key_is_named_with_its_article(db):
    with pytest.raises(InputInvalidError) as caught:
        jobs.takes_kwargs.enqueue(data={1: "x"})
    assert "key 1 is an int; JSON keys are strings" in str(caught.value)


def test_positional_inputs_are_refused_with_a_code_and_the_keyword_call(db):
    with pytest.raises(InputInvalidError) as caught:
        jobs.ok.enqueue(5)
    assert caught.value.code == "X_INPUT_INVALID"
    assert "positional" in str(caught.value) and "keyword arguments only" in str(caught.value)
    assert caught.value.hint == "call ok.enqueue(n=...)"


def test_positional_inputs_are_refused_by_aenqueue_too():
    import asyncio

    with pytest.raises(InputInvalidError) as caught:
        asyncio.run(jobs.ok.aenqueue(5))
    assert caught.value.hint == "call ok.enqueue(n=...)"


@pytest.mark.parametrize(
    "source",
    [
        "def charge(order_id: int): ...",
        "def charge(): ...",
        "def charge(*, order_id): ...",
        "def charge(order_id=1): ...",
    ],
)
def test_a_handler_missing_ctx_is_named_as_such(source):
    namespace: dict = {}
    exec(source, namespace)
    with pytest.raises(JobDefinitionError) as caught:
        job(idempotency_key="charge", name="tests.messages.charge")(namespace["charge"])
    assert "handler charge() is missing its ctx parameter" in str(caught.value)
    assert caught.value.hint == "def charge(ctx, ...): ..."


#: "SPEC ...", "DESIGN §7", or an id such as STEP-07, SE-42, Q-07, OUTBOX-12
SPEC_ID = re.compile(r"\bSPEC\b|\bDESIGN\b|\b(?!UTF-)(?:SE|Q|[A-Z]{3,8})-\d{1,2}\b")


def test_no_user_facing_string_cites_the_spec():
    """Messages, hints and help texts speak to users; SPEC/DESIGN ids belong in comments and
    docstrings, where the next developer reads them."""
    package = Path(django_xjobs.__file__).parent
    cited = []
    for path in sorted(package.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and SPEC_ID.search(node.value)
            ):
                cited.append(f"{path.relative_to(package)}:{node.lineno}: {node.value[:60]!r}")
    for path in sorted((package / "templates").rglob("*.html")):
        if SPEC_ID.search(path.read_text()):
            cited.append(str(path.relative_to(package)))
    assert cited == []
