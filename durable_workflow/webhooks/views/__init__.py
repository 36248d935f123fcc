"""Class-based JSON views, one module per family of routes."""

from durable_workflow.webhooks.views.activities import (
    CancelledActivityView,
    CompleteActivityView,
    FailActivityView,
    HeartbeatActivityView,
)
from durable_workflow.webhooks.views.commands import (
    ArchiveView,
    CancelView,
    RepairView,
    SignalView,
    TerminateView,
)
from durable_workflow.webhooks.views.reads import DescribeView, QueryView
from durable_workflow.webhooks.views.start import (
    ControlPlaneStartView,
    SignalWithStartView,
    StartView,
    UpdateWithStartView,
)
from durable_workflow.webhooks.views.updates import UpdateView

__all__ = [
    "ArchiveView",
    "CancelView",
    "CancelledActivityView",
    "CompleteActivityView",
    "ControlPlaneStartView",
    "DescribeView",
    "FailActivityView",
    "HeartbeatActivityView",
    "QueryView",
    "RepairView",
    "SignalView",
    "SignalWithStartView",
    "StartView",
    "TerminateView",
    "UpdateView",
    "UpdateWithStartView",
]
