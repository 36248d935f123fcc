"""Operator JSON: health (503 when blocking), metrics snapshot, history export.

Every view checks a Django permission (``durable_workflow.view_workflowrun``
by default). A load balancer probe without a user can be given its own
route: ``HealthView.as_view(permission_required=None)``.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.views import View

from durable_workflow.ids import instance_file_name
from durable_workflow.namespaces import InvalidNamespaceError
from durable_workflow.operations.export import ExportError, build_bundle
from durable_workflow.operations.health import health
from durable_workflow.operations.metrics import operator_metrics

VIEW_PERMISSION = "durable_workflow.view_workflowrun"


class OperatorJsonView(View):
    http_method_names = ["get", "head", "options"]
    permission_required: str | None = VIEW_PERMISSION

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if self.permission_required:
            user = getattr(request, "user", None)
            if user is None or not user.is_authenticated:
                return _error(401, "not_authenticated", "log in to read operator data")
            if not user.has_perm(self.permission_required):
                return _error(
                    403, "permission_denied", f"requires the {self.permission_required} permission"
                )
        return super().dispatch(request, *args, **kwargs)


def _error(status: int, reason: str, message: str) -> JsonResponse:
    return JsonResponse({"error": message, "reason": reason}, status=status)


def _json(document: dict[str, Any], status: int = 200) -> HttpResponse:
    return HttpResponse(
        json.dumps(document, ensure_ascii=False), status=status, content_type="application/json"
    )


class HealthView(OperatorJsonView):
    """``?broker=0`` skips the broker round trip."""

    def get(self, request: HttpRequest) -> HttpResponse:
        snapshot, status = health(include_broker=request.GET.get("broker", "1") != "0")
        return _json(snapshot, status)


class MetricsView(OperatorJsonView):
    def get(self, request: HttpRequest) -> HttpResponse:
        return _json(operator_metrics())


class HistoryExportView(OperatorJsonView):
    def get(self, request: HttpRequest, instance_id: str, run_id: Any = None) -> HttpResponse:
        try:
            bundle = build_bundle(
                instance_id,
                run_id=str(run_id) if run_id else None,
                namespace=request.GET.get("namespace"),
            )
        except ExportError as exc:
            return _error(404, "not_found", str(exc))
        except InvalidNamespaceError as exc:
            return _error(422, "invalid_namespace", str(exc))
        response = _json(bundle)
        name = f"{instance_file_name(instance_id)}-{bundle['selected_run']['run_id']}.json"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
