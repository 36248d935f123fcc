"""Mount the webhooks in the host URLconf::

    path("webhooks/", include("durable_workflow.webhooks.urls")),

Only workflows that opt in (``webhook = True`` or ``webhook_alias = "..."``
on the class, or ``DURABLE_WORKFLOW_WEBHOOKS["WORKFLOWS"]``) are reachable.
"""

from __future__ import annotations

from durable_workflow.webhooks.routes import routes

app_name = "durable_workflow_webhooks"

urlpatterns = routes()
