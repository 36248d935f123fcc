"""The scrape endpoint; mount it in the host URLconf::

path("metrics/", include("durable_workflow.contrib.prometheus.urls")),
"""

from __future__ import annotations

from django.urls import path

from durable_workflow.contrib.prometheus.views import PrometheusMetricsView

app_name = "durable_workflow_prometheus"

urlpatterns = [path("", PrometheusMetricsView.as_view(), name="metrics")]
