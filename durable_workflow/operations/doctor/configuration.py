"""Checks of configuration: settings, codec, structural limits, type keys in use."""

from __future__ import annotations

from durable_workflow import registry
from durable_workflow.conf import DEFAULT_LIMITS, get_settings
from durable_workflow.models import (
    TERMINAL_RUN_STATUSES,
    ActivityExecution,
    ActivityStatus,
    RunStatus,
    WorkflowRun,
)
from durable_workflow.operations.doctor.result import (
    ERROR,
    OK,
    WARNING,
    CheckResult,
    DoctorContext,
)


def check_settings(ctx: DoctorContext) -> CheckResult:
    title = "DURABLE_WORKFLOW settings"
    try:
        get_settings()
    except Exception as exc:
        return CheckResult(
            "settings",
            title,
            ERROR,
            str(exc),
            "Fix settings.DURABLE_WORKFLOW (docs/reference/settings.md lists every key).",
        )
    return CheckResult("settings", title, OK, "the settings are valid")


def check_payload_codec(ctx: DoctorContext) -> CheckResult:
    codec = get_settings().PAYLOAD_CODEC
    title = "Payload codec"
    if codec != "avro":
        return CheckResult(
            "payload_codec",
            title,
            WARNING,
            f"new runs store payloads with the {codec!r} codec, not Avro",
            "Leave PAYLOAD_CODEC at 'avro' unless every consumer of the payloads is Python.",
            details={"codec": codec},
        )
    return CheckResult("payload_codec", title, OK, "new runs use Avro", details={"codec": codec})


def check_structural_limits(ctx: DoctorContext) -> CheckResult:
    settings = get_settings()
    effective = {kind: settings.limit(kind) for kind in DEFAULT_LIMITS}
    disabled = sorted(kind for kind, value in effective.items() if value == 0)
    raised = sorted(kind for kind, value in effective.items() if value > DEFAULT_LIMITS[kind])
    details = {"limits": effective, "disabled": disabled, "raised": raised}
    title = "Structural limits"
    if disabled:
        return CheckResult(
            "structural_limits",
            title,
            WARNING,
            f"structural limit(s) turned off: {', '.join(disabled)}",
            "A runaway workflow can then grow without bound; set a ceiling in "
            "DURABLE_WORKFLOW['STRUCTURAL_LIMITS'] instead of 0.",
            details=details,
        )
    message = "structural limits are enforced"
    if raised:
        message += f" (raised above the defaults: {', '.join(raised)})"
    return CheckResult("structural_limits", title, OK, message, details=details)


def check_type_keys(ctx: DoctorContext) -> CheckResult:
    workflows = set(registry.workflows())
    activities = set(registry.activities())
    # order_by(): the models' default ordering would make every row's created_at (or
    # sequence) part of the DISTINCT, sending each open run back instead of each type.
    # The open statuses named (not the closed ones excluded): an index-only scan of
    # (status, workflow_type) over the open runs' entries alone.
    open_statuses = [s for s in RunStatus.values if s not in TERMINAL_RUN_STATUSES]
    missing_workflows = sorted(
        set(
            WorkflowRun.objects.filter(status__in=open_statuses)
            .order_by()
            .values_list("workflow_type", flat=True)
            .distinct()
        )
        - workflows
    )
    pending = ActivityExecution.objects.filter(
        status__in=(ActivityStatus.PENDING, ActivityStatus.RUNNING)
    ).exclude(run__status__in=TERMINAL_RUN_STATUSES)
    missing_activities = sorted(
        set(pending.order_by().values_list("activity_type", flat=True).distinct()) - activities
    )
    details = {"workflow_types": missing_workflows, "activity_types": missing_activities}
    title = "Type keys of open work are registered"
    if missing_workflows:
        return CheckResult(
            "unregistered_types",
            title,
            ERROR,
            f"open runs use workflow type key(s) no class is registered for: "
            f"{', '.join(missing_workflows)}",
            "Deploy the code that defines them (a `workflows.py` module in an installed app), "
            "or keep the old `type_key` on the renamed class.",
            details=details,
        )
    if missing_activities:
        return CheckResult(
            "unregistered_types",
            title,
            WARNING,
            f"pending activities use type key(s) not registered in this process: "
            f"{', '.join(missing_activities)}",
            "Fine when another service's workers run them; otherwise deploy their classes.",
            details=details,
        )
    return CheckResult("unregistered_types", title, OK, "every type key in use is registered")


def check_beat_entries(ctx: DoctorContext) -> CheckResult:
    from durable_workflow.operations import beat

    title = "Beat runs the periodic tasks"
    missing = beat.missing(with_database=True)
    details = {"missing": missing}
    if missing:
        return CheckResult(
            "beat_entries",
            title,
            WARNING,
            "; ".join(beat.describe(task) for task in missing),
            "Add the entries to the Celery app's beat_schedule and run `celery beat`, or run "
            "the --loop commands (then ignore this finding).",
            details=details,
        )
    return CheckResult(
        "beat_entries", title, OK, "beat has entries for the periodic tasks", details=details
    )


def check_guardrails(ctx: DoctorContext) -> CheckResult:
    """The boot-time scan's findings in registered workflows (docs/explanation/replay.md)."""
    from durable_workflow import guardrails

    found = guardrails.findings(list(registry.workflows().values()))
    title = "Workflow code replays deterministically"
    details = {"findings": [str(f) for f in found]}
    if found:
        first = "; ".join(str(f) for f in found[:3])
        more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        return CheckResult(
            "guardrails",
            title,
            WARNING,
            f"{len(found)} call(s) or write(s) that differ on replay: {first}{more}",
            "Use dw.now(), dw.side_effect(), dw.uuid4() or an activity instead "
            "(docs/explanation/replay.md#guarded-calls).",
            details=details,
        )
    return CheckResult(
        "guardrails", title, OK, "no call that differs on replay found", details=details
    )
