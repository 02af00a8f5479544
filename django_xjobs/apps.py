from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class XJobsConfig(AppConfig):
    name = "django_xjobs"
    verbose_name = "Background jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from .declarations.registry import tasks_api, use_tasks
        from .drivers import connections  # noqa: F401  (bounds the roles' connections as they open)
        from .management import checks  # noqa: F401  (registers the system checks)

        if tasks_api() is not None:  # Django 6's django.tasks, or the backport on 5.2
            from .backends import resolver

            use_tasks(resolver.Resolver())

        # Import every installed app's jobs.py, as the admin does with admin.py, so a worker
        # knows every job and cron the project declares. Only jobs.py: tasks.py belongs to
        # django.tasks and Celery projects.
        autodiscover_modules("jobs")
