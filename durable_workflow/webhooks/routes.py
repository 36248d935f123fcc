"""The URL patterns; ``urls.py`` is ``routes()`` with per-class opt-in."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, re_path
from django.views.decorators.csrf import csrf_exempt

from durable_workflow.webhooks import responses, views


@csrf_exempt
def unknown_route(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Anything else under the prefix: a JSON 404 rather than Django's HTML page."""
    return responses.not_found("unknown_route", "No webhook route matches this path.")


def routes(workflows: Any = None) -> list[URLPattern]:
    """Every webhook route. ``workflows`` (classes or type keys, or ``{alias: class}``)
    replaces the ``webhook`` class attribute and the ``WORKFLOWS`` setting when given."""

    def view(cls: Any) -> Any:
        return cls.as_view(workflows=workflows)

    instance = "instances/<str:instance_id>/"
    run = instance + "runs/<str:run_id>/"
    patterns = [
        path("start/<str:alias>", view(views.StartView), name="start"),
        path(
            "start/<str:alias>/signals/<str:signal>",
            view(views.SignalWithStartView),
            name="signal-with-start",
        ),
        path(
            "start/<str:alias>/updates/<str:update>",
            view(views.UpdateWithStartView),
            name="update-with-start",
        ),
        path("control-plane/start", view(views.ControlPlaneStartView), name="control-plane-start"),
        path("activities/complete", view(views.CompleteActivityView), name="activity-complete"),
        path("activities/fail", view(views.FailActivityView), name="activity-fail"),
        path("activities/heartbeat", view(views.HeartbeatActivityView), name="activity-heartbeat"),
        path(
            "activities/report-cancellation",
            view(views.CancelledActivityView),
            name="activity-report-cancellation",
        ),
    ]
    for prefix, scope in ((instance, "instance"), (run, "run")):
        patterns += [
            path(prefix + "signals/<str:signal>", view(views.SignalView), name=f"{scope}-signal"),
            path(prefix + "queries/<str:query>", view(views.QueryView), name=f"{scope}-query"),
            path(prefix + "updates/<str:name>", view(views.UpdateView), name=f"{scope}-update"),
            path(prefix + "cancel", view(views.CancelView), name=f"{scope}-cancel"),
            path(prefix + "terminate", view(views.TerminateView), name=f"{scope}-terminate"),
            path(prefix + "repair", view(views.RepairView), name=f"{scope}-repair"),
            path(prefix + "archive", view(views.ArchiveView), name=f"{scope}-archive"),
            path(prefix + "describe", view(views.DescribeView), name=f"{scope}-describe"),
        ]
    patterns.append(re_path(r"^(?P<rest>[\s\S]*)\Z", unknown_route, name="unknown-route"))
    return patterns
