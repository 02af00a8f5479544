"""Settings for the benchmark: PostgreSQL from DATABASE_URL, or an embedded throwaway server.
The admin is installed for INPUT10M, which times the job list as an operator's browser gets it."""

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
    "django.contrib.admin",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django_xjobs",
    "bench",
]
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
ROOT_URLCONF = "bench.urls"
ALLOWED_HOSTS = ["testserver"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
XJOBS: dict[str, object] = {"POLL_INTERVAL": 0.05}
if os.environ.get("XJOBS_BENCH_ENCRYPT"):  # python -m bench.run --encrypt (issue 46)
    XJOBS["ENCRYPTION_KEYS"] = ["IyAVGb74KSM4V7OAxMkA2luUHarE32uaq6xCUOU2ovc="]  # bench-only
