"""The tutorial's shop (docs/tutorial.md), run from the page itself: its ``shop/models.py``,
``shop/jobs.py``, ``shop/views.py`` and ``config/urls.py`` blocks are executed as modules of a
``shop`` app, and the tests it tells a reader to write (its ``shop/tests.py`` block) run here
under the default settings. A change to the page that breaks its code fails here, not in a
reader's project.

The shop's table is made inside the test's transaction and rolls back with it; its model lives
in an isolated app registry, so the project's own models and migrations never see it.
"""

from __future__ import annotations

import json
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core import mail
from django.db import connection
from django.test import RequestFactory, override_settings
from django.test.utils import isolate_apps

from django_xjobs import conf, inspect_job
from django_xjobs.declarations.registry import get_job, unregister
from django_xjobs.testing import run_until_idle

# Django 6.1 deprecates the EMAIL_* settings for MAILERS (RemovedInDjango2028Warning) and warns on a
# send without MAILERS, as the suite's own settings have none; the page in a project
# startproject made, with its MAILERS, runs under warnings-as-errors in test_tutorial_project.py
pytestmark = [
    pytest.mark.filterwarnings("ignore:The EMAIL_[A-Z_]+ setting is deprecated"),
    pytest.mark.filterwarnings("ignore:Django 2028 will not have a default mailer"),
]

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"


def snippet(path: str) -> str:
    """The page's one Python block that starts with ``# <path>``."""
    blocks = re.findall(r"^```python\n(.*?)^```", TUTORIAL.read_text(), flags=re.S | re.M)
    [block] = [b for b in blocks if b.startswith(f"# {path}\n")]
    return block


def load(path: str, name: str, **module_globals: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__package__ = name.rpartition(".")[0]
    module.__dict__.update(module_globals)
    sys.modules[name] = module
    exec(compile(snippet(path), f"docs/tutorial.md:{path}", "exec"), module.__dict__)
    return module


@pytest.fixture
def shop(db) -> Iterator[types.SimpleNamespace]:
    package = types.ModuleType("shop")
    package.__path__ = []
    sys.modules["shop"] = package
    try:
        with override_settings(XJOBS={}), isolate_apps("tests"):
            assert conf.get().outbox == "auto"  # a reader's settings: enqueues are staged
            # a model needs an installed app: the block runs as a module of the tests app, and
            # its table gets a name of its own (tests.Order has tests_order)
            models = load("shop/models.py", "tests.tutorial_shop")
            models.Order._meta.db_table = "tutorial_shop_order"
            sys.modules["shop.models"] = models
            with connection.schema_editor() as editor:
                editor.create_model(models.Order)
            jobs = load("shop/jobs.py", "shop.jobs")
            package.jobs = jobs  # type: ignore[attr-defined]  # as an import binds it
            views = load("shop/views.py", "shop.views")
            tests = load("shop/tests.py", "shop.tests")
            urls = load("config/urls.py", "tutorial_config.urls")
            yield types.SimpleNamespace(
                Order=models.Order, jobs=jobs, views=views, tests=tests, urls=urls
            )
    finally:
        unregister("shop.jobs.send_receipt")
        for name in [n for n in sys.modules if n == "shop" or n.startswith("shop.")]:
            del sys.modules[name]
        sys.modules.pop("tests.tutorial_shop", None)
        sys.modules.pop("tutorial_config.urls", None)


def test_the_job_is_declared_as_the_tutorial_says(shop):
    handle = get_job("shop.jobs.send_receipt")
    assert handle is shop.jobs.send_receipt
    assert handle.queue == "emails"
    assert handle.retry.attempts == 4
    assert [str(p.pattern) for p in shop.urls.urlpatterns] == ["admin/", "orders/"]


def test_the_view_enqueues_the_receipt_in_the_orders_transaction(shop):
    request = RequestFactory().post(
        "/orders/",
        data='{"email": "ada@example.com", "total_cents": 4200}',
        content_type="application/json",
    )
    response = shop.views.place_order(request)
    assert response.status_code == 201
    body = json.loads(response.content)
    assert shop.Order.objects.get(pk=body["order"]).email == "ada@example.com"
    [execution] = run_until_idle()
    assert str(execution.job.id) == body["receipt_job"]
    assert execution.outcome == "completed"
    assert mail.outbox[0].subject == f"Your order #{body['order']}"
    assert inspect_job(body["receipt_job"])["result"] == {
        "sent_to": "ada@example.com",
        "attempt": 1,
    }


def test_the_tutorials_test_the_receipt_is_mailed(shop):
    shop.tests.test_the_receipt_is_mailed(None)


def test_the_tutorials_test_of_a_dead_letter(shop):
    shop.tests.test_an_order_without_email_is_dead_lettered_at_once(None)


def test_the_tutorials_test_of_a_retry(shop, monkeypatch):
    shop.tests.test_a_receipt_retried_after_the_mail_server_is_back(None, monkeypatch)
