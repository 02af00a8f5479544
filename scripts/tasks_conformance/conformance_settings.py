"""Settings for Django's task tests run against ``XJobsBackend``: PostgreSQL from DATABASE_URL,
else the embedded server, and Django's ``tests/tasks`` as an app (a worker imports a task only
from an installed app's modules)."""

from django_xjobs.testing.postgres import database_config, database_url

SECRET_KEY = "tasks-conformance"
USE_TZ = True
DATABASES = {"default": database_config(database_url(lazy=True))}
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django_xjobs",
    "tasks",
]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
TASKS = {"default": {"BACKEND": "glue.QueuedBackend"}}
XJOBS = {"OUTBOX": "off", "POLL_INTERVAL": 0.2}
