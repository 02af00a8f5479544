"""Views the tests call through Django's test client, as a web request would."""

from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest, JsonResponse

from . import tasks


def enqueue_tasks(request: HttpRequest) -> JsonResponse:
    """Enqueue ``n`` ``django.tasks`` tasks in one transaction, as a view with an order would."""
    prefix, n = request.POST["prefix"], int(request.POST["n"])
    with transaction.atomic():
        ids = [tasks.ledgered.enqueue(f"{prefix}-{i}").id for i in range(n)]
    return JsonResponse({"ids": ids})
