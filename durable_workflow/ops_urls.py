"""Operator JSON endpoints; mount them in the host URLconf::

path("workflows/ops/", include("durable_workflow.ops_urls")),
"""

from __future__ import annotations

from django.urls import path

from durable_workflow.views.ops import HealthView, HistoryExportView, MetricsView

app_name = "durable_workflow_ops"

urlpatterns = [
    path("health/", HealthView.as_view(), name="health"),
    path("metrics/", MetricsView.as_view(), name="metrics"),
    path(
        "instances/<str:instance_id>/history-export/",
        HistoryExportView.as_view(),
        name="history-export",
    ),
    path(
        "instances/<str:instance_id>/runs/<uuid:run_id>/history-export/",
        HistoryExportView.as_view(),
        name="run-history-export",
    ),
]
