"""The base view: size limit, authentication, JSON parsing and error mapping.

Every webhook view is CSRF-exempt (callers are machines with credentials,
not browsers with cookies) and runs outside ``ATOMIC_REQUESTS``: each command
commits in its own transaction, and an update that waits for a worker must
have committed first. A POST must say ``Content-Type: application/json``
(415 otherwise, before anything else is looked at): a page on another site
cannot send that without a CORS preflight, so a browser that carries cookies
cannot be made to post here. An authenticator that trusts a session must
still enforce CSRF itself (``auth.enforce_csrf``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import connections, transaction
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from durable_workflow import namespaces
from durable_workflow.exceptions import (
    InvalidInstanceIdError,
    InvalidValueError,
    PayloadCodecError,
    StructuralLimitExceeded,
    WorkflowNotFoundError,
)
from durable_workflow.ids import validate_instance_id
from durable_workflow.logs import get_logger
from durable_workflow.store import runs
from durable_workflow.store.records import InstanceRecord, RunRecord
from durable_workflow.text import problem
from durable_workflow.webhooks import exposure, records, responses
from durable_workflow.webhooks.auth import AuthResult, authenticate
from durable_workflow.webhooks.conf import webhook_settings
from durable_workflow.webhooks.validation import (
    RequestInvalid,
    invalid_field,
    parse_object,
    read_body,
)

logger = get_logger("durable_workflow.webhooks")

_CORRELATION_HEADERS = ("X-Request-Id", "X-Correlation-Id")


def _route_safe(value: Any) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= 255
        and not any(ord(char) < 32 or ord(char) == 127 for char in value)
    )


def request_namespace(request: HttpRequest) -> str:
    """The namespace a request names: the ``X-Namespace`` header, else the ``namespace``
    query parameter, else the configured default."""
    named = request.headers.get("X-Namespace")
    if named is None:
        named = request.GET.get("namespace")
    return namespaces.resolve(named)


class Respond(Exception):
    """Stop handling and answer with ``response``."""

    def __init__(self, response: HttpResponse):
        self.response = response
        super().__init__(response.status_code)


class WebhookView(View):
    http_method_names = ["post", "options"]
    #: Explicit exposure given to ``routes(workflows=...)``; ``None`` uses opt-in.
    workflows: Any = None

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Any:
        view = super().as_view(**initkwargs)
        # Never inside ATOMIC_REQUESTS, on any database (the engine's may not be default):
        # each command commits, and publishes, on its own.
        for alias in connections:
            view = transaction.non_atomic_requests(using=alias)(view)
        return csrf_exempt(view)

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if (request.method or "").lower() not in self.http_method_names:
            return self.http_method_not_allowed(request, *args, **kwargs)
        if request.method == "POST" and request.content_type != "application/json":
            return responses.error(
                415, "unsupported_media_type", "Send the request as Content-Type: application/json."
            )
        self.config = webhook_settings()
        try:
            self.raw_body = read_body(request, self.config)
        except RequestInvalid as exc:
            return self.invalid(exc)
        self.auth: AuthResult = authenticate(request, self.raw_body, self.config)
        if not self.auth.ok:
            return responses.unauthorized(self.auth.reason, self.auth.message)
        try:
            self.namespace = request_namespace(request)
        except namespaces.InvalidNamespaceError as exc:
            return responses.error(422, "invalid_namespace", str(exc))
        if not all(_route_safe(value) for value in kwargs.values()):
            # No workflow can declare such a name, and no column could store it.
            return responses.not_found("unknown_route", "No webhook route matches this path.")
        try:
            return super().dispatch(request, *args, **kwargs)
        except Respond as stop:
            return stop.response
        except RequestInvalid as exc:
            return self.invalid(exc)
        except WorkflowNotFoundError as exc:
            return responses.not_found("instance_not_found", str(exc))
        except (PayloadCodecError, StructuralLimitExceeded, InvalidValueError) as exc:
            return responses.error(422, "invalid_payload", str(exc)[:500])

    @staticmethod
    def invalid(exc: RequestInvalid) -> HttpResponse:
        return responses.error(422, exc.reason, exc.message, exc.errors)

    # --------------------------------------------------------- helpers
    def body(self) -> dict[str, Any]:
        if not hasattr(self, "_data"):
            self._data = parse_object(self.raw_body, self.config)
        return self._data

    def exposed_instance(self, instance_id: str) -> InstanceRecord:
        """The instance, or 404 when it does not exist or its type is not exposed."""
        try:
            validate_instance_id(instance_id)
            instance = runs.get_instance(instance_id, namespace=self.namespace)
        except InvalidInstanceIdError:
            instance = None
        if instance is None or not exposure.is_exposed(instance.workflow_type, self.workflows):
            raise Respond(
                responses.not_found(
                    "instance_not_found",
                    f"Workflow instance [{instance_id}] was not found.",
                    workflow_id=instance_id,
                )
            )
        return instance

    def selected_run(self, instance: InstanceRecord, run_id: str | None) -> RunRecord | None:
        """The run a run-targeted route names (404 if it is not one of the instance's)."""
        if run_id is None:
            return None
        run = records.run_of_instance(instance, run_id)
        if run is None:
            raise Respond(
                responses.not_found(
                    "run_not_found",
                    f"Workflow run [{run_id}] of instance [{instance.instance_id}] was not found.",
                    workflow_id=instance.instance_id,
                    run_id=run_id,
                )
            )
        return run

    def request_id(self) -> str | None:
        """The caller's ``X-Request-Id``: a retry with the same one gets the first answer.
        A value the engine would refuse (too long, control characters) is a 422."""
        value = self.request.headers.get("X-Request-Id")
        if not value:
            return None
        reason = problem(value, max_length=255)
        if reason is not None:
            raise invalid_field("X-Request-Id", f"The request id {reason}.")
        return str(value)

    def ingress(self, command_ids: list[Any], data: dict[str, Any]) -> None:
        """Record who sent the command, through which route, apart from its arguments."""
        headers = {
            name: str(self.request.headers.get(name, ""))[:255] for name in _CORRELATION_HEADERS
        }
        digest = hashlib.sha256(
            json.dumps({"payload": data, "headers": headers}, sort_keys=True, default=str).encode(
                "utf-8"
            )
        ).hexdigest()
        match = self.request.resolver_match
        context = {
            "caller": self.auth.caller,
            "auth_method": self.auth.method,
            "auth_outcome": self.auth.outcome,
            "route_name": match.view_name if match else None,
            "path": self.request.path[:1000],
            "fingerprint": digest,
            "request_id": headers["X-Request-Id"] or None,
            "correlation_id": headers["X-Correlation-Id"] or None,
        }
        try:
            records.attach_ingress(command_ids, context)
        except Exception:  # the command itself is durable; its context is best effort
            logger.exception("could not record webhook ingress context")
