"""The run pages' compatibility line: the run's marker, and whether it waits for a worker."""

from __future__ import annotations

from django.utils.html import format_html

from durable_workflow import clock
from durable_workflow.compatibility import NO_COMPATIBLE_WORKER
from durable_workflow.models import WorkflowRun
from durable_workflow.operations.compatibility import (
    WAITING_LABEL,
    waiting_for_compatible_worker,
)


def waiting_note(run: WorkflowRun) -> str | None:
    """Why an open run waits for a compatible worker (``None`` when it does not).

    One query when the run has no ready task with a foreign marker (closed runs
    have no ready task), so every run page costs the same.
    """
    view = waiting_for_compatible_worker(now=clock.now(), run_id=run.pk, limit=5)
    if not view.waiting_count:
        return None
    offered = sorted({m for worker in view.fleet for m in worker.markers})
    return (
        f"{WAITING_LABEL} ({NO_COMPATIBLE_WORKER}): no live worker supports "
        f"{', '.join(view.blocked_markers)}; live workers support "
        f"{', '.join(offered) or 'no marker'}. Not stuck: it resumes once such a worker runs."
    )


def compatibility_html(run: WorkflowRun) -> str:
    marker = run.compatibility or "none (any worker may run it)"
    note = waiting_note(run)
    if note is None:
        return format_html("{}", marker)
    return format_html('{} <strong class="dw-compatibility-waiting">{}</strong>', marker, note)
