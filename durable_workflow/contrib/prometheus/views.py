"""The scrape endpoint: the Prometheus text format (or OpenMetrics, when asked for).

Who may read it (docs/how-to/metrics.md#protect-the-endpoint): a request with
``Authorization: Bearer <PROMETHEUS_SCRAPE_TOKEN>`` when that setting is set, else a
logged-in user with the ``durable_workflow.view_workflowrun`` permission, as for the
operator JSON views. A route of your own with ``permission_required=None`` serves
anyone who reaches it (an internal port, a network allow-list).
"""

from __future__ import annotations

import hmac
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.views import View
from prometheus_client.exposition import choose_encoder

from durable_workflow.conf import get_settings
from durable_workflow.contrib.prometheus.registry import scrape_registry
from durable_workflow.views.ops import OperatorJsonView


class PrometheusMetricsView(OperatorJsonView):
    """``?database=0`` leaves out the gauges read from the database."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        token = get_settings().PROMETHEUS_SCRAPE_TOKEN
        given = request.headers.get("Authorization", "")
        if token and given:
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                value.strip().encode(), token.encode()
            ):
                refused = {"error": "wrong scrape token", "reason": "not_authenticated"}
                return JsonResponse(refused, status=401)
            return View.dispatch(self, request, *args, **kwargs)
        return super().dispatch(request, *args, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        registry = scrape_registry(database=request.GET.get("database", "1") != "0")
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return HttpResponse(encoder(registry), content_type=content_type)
