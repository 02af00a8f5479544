"""The jobs the library itself declares, found as every installed app's ``jobs.py`` is (so a
worker knows them): ``django_xjobs.bulk_action``, the admin's bulk action larger than a batch
(issue 45), on queue ``xjobs``."""

from .operations.background import bulk_action

__all__ = ["bulk_action"]
