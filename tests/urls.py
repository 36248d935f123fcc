from django.contrib import admin
from django.urls import include, path

from tests.testapp import async_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("workflows/ops/", include("durable_workflow.ops_urls")),
    path("webhooks/", include("durable_workflow.webhooks.urls")),
    path("metrics/", include("durable_workflow.contrib.prometheus.urls")),
    path("async/runs/", async_views.runs),
    path("async/<str:instance_id>/start/", async_views.start),
    path("async/<str:instance_id>/add/", async_views.add),
    path("async/<str:instance_id>/total/", async_views.total),
    path("async/<str:instance_id>/close/", async_views.close),
    path("async/<str:instance_id>/result/", async_views.result),
]
