"""Settings for the test suite: PostgreSQL from DATABASE_URL, or an embedded throwaway server
that starts only when the first test that uses the database is set up (tests/conftest.py), so
the unit lane and the linters that load these settings need no server."""

import importlib.util

from django_xjobs.testing.postgres import database_config, database_url

SECRET_KEY = "tests-only"
USE_TZ = True
TIME_ZONE = "UTC"
DATABASES = {"default": database_config(database_url(lazy=True))}
# A second database on the same server, for the outbox across databases
# (tests/outbox/test_outbox.py).
DATABASES["orders"] = {
    **DATABASES["default"],
    "NAME": f"{DATABASES['default']['NAME']}_orders",
    "TEST": {"NAME": f"test_{DATABASES['default']['NAME']}_orders"},
}
# A third, standing in for a streaming replica (XJOBS["READ_DATABASE"], issue 46 item 2): the
# tests give it rows the jobs database does not hold, so each read surface shows where it read.
DATABASES["replica"] = {
    **DATABASES["default"],
    "NAME": f"{DATABASES['default']['NAME']}_replica",
    "TEST": {"NAME": f"test_{DATABASES['default']['NAME']}_replica"},
}
# A fourth, the second jobs database of XJOBS["QUEUE_DATABASES"] (issue 48): jobs routed there
# live apart from the default database's (tests/drivers/test_routing.py).
DATABASES["shard"] = {
    **DATABASES["default"],
    "NAME": f"{DATABASES['default']['NAME']}_shard",
    "TEST": {"NAME": f"test_{DATABASES['default']['NAME']}_shard"},
}
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.admin",
    "django.contrib.sessions",
    "django.contrib.messages",
    # the admin's stylesheets, served by the live server to the browser tests
    # (admin/test_browser.py)
    "django.contrib.staticfiles",
    "django_xjobs",
    "tests",
]
STATIC_URL = "static/"
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.request",
            ]
        },
    }
]
ROOT_URLCONF = "tests.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The suite's driver and worker tests enqueue directly (most run inside a test transaction,
# where the default "auto" would stage into the outbox); tests/outbox/test_outbox.py turns it on.
XJOBS = {"QUEUES": ["other"], "POLL_INTERVAL": 0.2, "OUTBOX": "off"}

# Django's own task API, run by django-xjobs (tests/tasks.py): Django 6 has it, Django 5.2 the
# django-tasks backport, which is an app of its own (its checks and signals).
TASKS = {
    "default": {"BACKEND": "django_xjobs.backends.XJobsBackend", "QUEUES": ["default", "other"]},
    "retrying": {
        "BACKEND": "django_xjobs.backends.XJobsBackend",
        "OPTIONS": {"RETRY": {"attempts": 3, "delay": "1s", "jitter": False}},
    },
    "bounded": {"BACKEND": "django_xjobs.backends.XJobsBackend", "OPTIONS": {"TIMEOUT": "100ms"}},
}
if importlib.util.find_spec("django.tasks") is None:
    INSTALLED_APPS.append("django_tasks")
