"""Settings for the benchmark: PostgreSQL from DATABASE_URL, or an embedded throwaway server."""

import os

from django_xjobs.testing.postgres import database_config, database_url

SECRET_KEY = "bench-only"
DEBUG = False  # with DEBUG on, Django keeps every query in memory
USE_TZ = True
TIME_ZONE = "UTC"
DATABASES = {"default": database_config(database_url())}
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_xjobs",
    "bench",
]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
XJOBS: dict[str, object] = {"POLL_INTERVAL": 0.05}
if os.environ.get("XJOBS_BENCH_ENCRYPT"):  # python -m bench.run --encrypt (issue 46)
    XJOBS["ENCRYPTION_KEYS"] = ["IyAVGb74KSM4V7OAxMkA2luUHarE32uaq6xCUOU2ovc="]  # bench-only
