"""The Prometheus scrape endpoint, to mount in your ``urls.py``::

    import django_xjobs.views

    urlpatterns = [path("metrics/", django_xjobs.views.metrics_view)]

It is not authenticated: keep it off the public internet (network rules, a reverse proxy that
only lets Prometheus in) or wrap it in a check of your own, such as a bearer token Prometheus
sends. Without ``prometheus-client`` installed it answers 501 with the install command. See
docs/howto/monitoring.md.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse

from . import metrics

_registry: CollectorRegistry | None = None
_registry_lock = threading.Lock()

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Every ``xjobs_*`` series in the Prometheus text format (or OpenMetrics, if asked)."""
    try:
        from prometheus_client.exposition import choose_encoder
    except ImportError:
        return HttpResponse(metrics.MISSING + "\n", status=501, content_type="text/plain")
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encode(_the_registry()), content_type=content_type)


def _the_registry() -> CollectorRegistry:
    """The registry, built on the first scrape and reused by every later one."""
    global _registry
    with _registry_lock:
        if _registry is None:
            _registry = metrics.registry()
        return _registry
