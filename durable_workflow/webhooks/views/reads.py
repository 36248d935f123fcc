"""Read-only routes: queries (a replay, no command row) and describe (no replay at all)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from durable_workflow.exceptions import DurableWorkflowError, QueryFailedError
from durable_workflow.executor import readonly
from durable_workflow.models import WorkflowInstance
from durable_workflow.namespaces import instance_key
from durable_workflow.store import runs
from durable_workflow.webhooks import describe, exposure, responses, validation
from durable_workflow.webhooks.views.base import WebhookView

#: Query failures by reason: HTTP status and the key that carries the reason.
_QUERY_FAILURES = {
    "invalid_query_arguments": (422, "reason"),
    "query_rejected": (422, "reason"),
    "rejected_unknown_query": (409, "reason"),
    "rejected_not_started": (409, "reason"),
    "workflow_definition_unavailable": (409, "blocked_reason"),
}


class QueryView(WebhookView):
    """``POST instances/<id>[/runs/<run>]/queries/<query>`` with optional ``arguments``."""

    def post(
        self, request: HttpRequest, instance_id: str, query: str, run_id: str | None = None
    ) -> HttpResponse:
        instance = self.exposed_instance(instance_id)
        selected = self.selected_run(instance, run_id)
        data = self.body()
        validation.refuse_unknown(data, {"arguments"})
        arguments = validation.arguments(data)
        run = selected or runs.current_run(instance.instance_id, namespace=instance.namespace)
        base: dict[str, Any] = {
            "query_name": query,
            "workflow_id": instance.instance_id,
            "run_id": str(run.id) if run else None,
            "target_scope": "run" if selected is not None else "instance",
        }
        if run is None:
            return self._failed(
                base,
                QueryFailedError(
                    "rejected_not_started",
                    f"Workflow [{instance.instance_id}] has not started yet.",
                ),
            )
        try:
            public, result = readonly.run_query(run, query, arguments)
        except QueryFailedError as exc:
            return self._failed(base, exc)
        except DurableWorkflowError as exc:  # e.g. the code no longer replays this history
            base.update(
                blocked_reason="replay_failed",
                message=f"Workflow query [{query}] could not replay the run: {exc}"[:1000],
            )
            return responses.json_response(base, 409)
        base.update(query_name=public, result=result)
        return responses.json_response(base, 200)

    @staticmethod
    def _failed(base: dict[str, Any], exc: QueryFailedError) -> HttpResponse:
        status, key = _QUERY_FAILURES.get(exc.reason or "", (409, "reason"))
        document = {**base, key: exc.reason, "message": str(exc)}
        errors = exc.metadata.get("validation_errors")
        if errors:
            document["validation_errors"] = errors
        return responses.json_response(document, status)


class DescribeView(WebhookView):
    """``GET instances/<id>[/runs/<run>]/describe``: state and available actions."""

    http_method_names = ["get", "options"]

    def get(
        self, request: HttpRequest, instance_id: str, run_id: str | None = None
    ) -> HttpResponse:
        key = instance_key(self.namespace, instance_id)
        instance = WorkflowInstance.objects.filter(key=key).first()
        if instance is None or not exposure.is_exposed(instance.workflow_type, self.workflows):
            return responses.json_response(describe.not_found(instance_id), 404)
        return responses.json_response(describe.describe(instance, run_id), 200)
