"""HTTP ingress: start, signal, update, query, cancel, terminate, repair and describe.

``durable_workflow.webhooks.urls`` is the URLconf to include; ``routes()`` builds
the same patterns for an explicit set of workflows. Settings live in
``DURABLE_WORKFLOW_WEBHOOKS`` (see ``durable_workflow.webhooks.conf``).
"""

from durable_workflow.webhooks.auth import AuthenticationFailed, WebhookAuthenticator, enforce_csrf
from durable_workflow.webhooks.routes import routes
from durable_workflow.webhooks.signing import canonical_string, sign

__all__ = [
    "AuthenticationFailed",
    "WebhookAuthenticator",
    "canonical_string",
    "enforce_csrf",
    "routes",
    "sign",
]
