"""Behind a transaction-mode pooler (issue 17 §2), in process: ``XJOBS["POOLER"]`` and
``XJOBS["LISTEN_DATABASE"]`` are refused when wrong, keep the roles' sessions free of state, and
move the listener to the direct alias or to polling with one log line. The real PgBouncer run
is tests/drivers/test_pooler_fleet.py."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.db import connection, connections
from django.test import override_settings

from django_xjobs import conf
from django_xjobs.drivers import connections as role
from django_xjobs.drivers.postgres import Listener, Polling, PostgresDriver, listener, sql
from django_xjobs.drivers.postgres.outbox import PostgresOutboxStore
from django_xjobs.errors import ConfigInvalidError
from django_xjobs.management import checks
from django_xjobs.outbox.relay import Relay
from tests import jobs
from tests.support.process import wait_for

POOLED = {**settings.XJOBS, "POOLER": "transaction"}


@pytest.fixture(autouse=True)
def fresh_fallback_log(monkeypatch):
    """Each test sees the once-per-process polling line as a new process would."""
    monkeypatch.setattr(listener, "_polling", set())


@pytest.fixture(scope="module")
def direct(django_db_setup) -> Iterator[str]:
    """A second alias of the test database, as a direct connection beside a pooled one (made
    before a test's database access is set up, so the test may name it)."""
    entry = dict(connections["default"].settings_dict)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(settings.DATABASES, "direct", entry)
        patch.setitem(connections.settings, "direct", entry)
        yield "direct"


BOTH = pytest.mark.django_db(transaction=True, databases=["default", "direct"])


@pytest.mark.parametrize(
    ("xjobs", "says"),
    [
        ({"POOLER": "session"}, "XJOBS[\"POOLER\"]='session' is not a pooling mode"),
        ({"LISTEN_DATABASE": "nowhere"}, "is not an alias in DATABASES"),
        ({"POOLER": "transaction", "LISTEN_DATABASE": "default"}, "is the pooled jobs database"),
    ],
)
def test_bad_pooler_settings_are_refused_with_a_code_and_a_hint(xjobs, says):
    with pytest.raises(ConfigInvalidError) as raised:
        conf.validate(xjobs)
    assert raised.value.code == "X_CONFIG_INVALID"
    assert says in raised.value.message and raised.value.hint


def test_a_system_check_reports_them_and_the_pooled_alias_server_side_cursors(monkeypatch):
    with override_settings(XJOBS={"POOLER": "bouncer"}):
        assert [m.id for m in checks.check_settings()] == ["django_xjobs.E001"]
    with override_settings(XJOBS=POOLED):
        found = [m for m in checks.check_settings() if m.id == "django_xjobs.W021"]
    assert len(found) == 1 and "DISABLE_SERVER_SIDE_CURSORS" in found[0].hint
    monkeypatch.setitem(settings.DATABASES["default"], "DISABLE_SERVER_SIDE_CURSORS", True)
    lite = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    monkeypatch.setitem(settings.DATABASES, "lite", lite)
    with override_settings(XJOBS={**POOLED, "LISTEN_DATABASE": "lite"}):
        ids = [m.id for m in checks.check_settings()]
    assert ids == ["django_xjobs.E015"]


def test_auto_prepared_statements_stay_off_behind_the_pooler():
    assert sql.prepares(connection)  # the suite's direct alias
    with override_settings(XJOBS=POOLED):
        assert not sql.prepares(connection)
    with override_settings(XJOBS={**POOLED, "PREPARED_STATEMENTS": True}):
        assert sql.prepares(connection)  # PgBouncer >= 1.21 with max_prepared_statements


def _timeouts() -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')"
        )
        return cursor.fetchone()


@pytest.mark.django_db(transaction=True)
def test_role_connections_set_no_session_setting_behind_the_pooler():
    """Through a transaction pooler a session setting would stay on a server connection that
    the pooler hands to its next client (a web request) after this role's statement."""
    unbound = _timeouts()
    with role.role_connections():
        assert _timeouts() != unbound  # direct: the roles' statements are bounded
    with override_settings(XJOBS=POOLED), role.role_connections():
        assert _timeouts() == unbound
        connection.close()
        connection.ensure_connection()  # a connection opened on a role thread: nothing either
        assert _timeouts() == unbound


@pytest.mark.django_db(transaction=True)
def test_without_a_listen_database_the_worker_polls_and_says_so_once(caplog):
    driver = PostgresDriver("default")
    with override_settings(XJOBS=POOLED), caplog.at_level(logging.WARNING, logger="django_xjobs"):
        notifiers = [driver.runs().notify_on_ready(["default"], lambda: None) for _ in range(2)]
    assert all(isinstance(n, Polling) for n in notifiers)
    lines = [r.getMessage() for r in caplog.records if "xjobs.listener.polling" in r.getMessage()]
    assert len(lines) == 1 and "LISTEN_DATABASE" in lines[0]
    for notifier in notifiers:
        notifier.stop()


@BOTH
def test_the_relay_polls_too_and_listens_on_the_direct_alias_when_given(caplog, direct):
    relay = Relay(store=PostgresOutboxStore("default"), database="default")
    with override_settings(XJOBS=POOLED), caplog.at_level(logging.WARNING, logger="django_xjobs"):
        assert relay._listen() is None
    assert "xjobs.listener.polling" in caplog.text and "channel=xjobs_outbox" in caplog.text
    with override_settings(XJOBS={**POOLED, "LISTEN_DATABASE": direct}):
        listener = relay._listen()
    try:
        assert isinstance(listener, Listener) and listener.using == direct
    finally:
        listener.stop()


@BOTH
def test_a_listener_on_the_listen_database_is_woken_by_an_enqueue(direct):
    woke = threading.Event()
    with override_settings(XJOBS={**POOLED, "LISTEN_DATABASE": direct}):
        listener = PostgresDriver("default").runs().notify_on_ready(["default"], woke.set)
        try:
            assert isinstance(listener, Listener) and listener.using == direct
            wait_for(woke.is_set, timeout=10, what="the listener's first call")  # it listens
            woke.clear()
            jobs.ok.using(outbox=False).enqueue(n=17)
            wait_for(woke.is_set, timeout=10, what="the NOTIFY of the enqueue")
        finally:
            listener.stop()
