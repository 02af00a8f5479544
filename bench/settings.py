"""Settings for the benchmark: PostgreSQL from DATABASE_URL, or an embedded throwaway server."""

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
XJOBS = {"POLL_INTERVAL": 0.05}
