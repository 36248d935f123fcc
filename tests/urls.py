from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("workflows/ops/", include("durable_workflow.ops_urls")),
    path("webhooks/", include("durable_workflow.webhooks.urls")),
    path("metrics/", include("durable_workflow.contrib.prometheus.urls")),
]
