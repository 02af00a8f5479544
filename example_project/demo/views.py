"""The transactional outbox in a view: the job exists if and only if the order does."""

from __future__ import annotations

import json

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from .jobs import send_order_confirmation
from .models import Order


@csrf_exempt  # an example API endpoint; a real one would authenticate
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    data = json.loads(request.body or b"{}")
    with transaction.atomic():
        order = Order.objects.create(email=data["email"], total_cents=int(data["total_cents"]))
        # Staged in this transaction: if anything below raises, neither the order nor the job
        # exists; once it commits, the job is published at once (or by xjobs_relay).
        result = send_order_confirmation.enqueue(order_id=order.pk)
    return JsonResponse({"order": order.pk, "job": str(result.id), "staged": result.staged})
