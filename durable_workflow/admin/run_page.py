"""What the top of a run's pages shows: the failure that stopped it, with the user's own
frames of the traceback highlighted (library frames folded away), and a strip of its
activities, timers and children over time."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import sysconfig
import uuid
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from durable_workflow import clock
from durable_workflow.models import (
    ActivityExecution,
    ChildCall,
    RunStatus,
    Timer,
    WorkflowFailure,
    WorkflowRun,
)
from durable_workflow.store.waits import task_failure_of

_FRAME = re.compile(r'^\s*File "(?P<path>[^"]*)", line \d+')
#: Paths of frames that are not the user's code: this library, installed packages, Python.
_LIBRARY_MARKERS = ("/durable_workflow/", "site-packages", "dist-packages", "<frozen")
_STDLIB = tuple(p for p in {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")} if p)
#: How many activities, timers and children the strip draws.
STRIP_ROWS = 40


@dataclasses.dataclass(frozen=True)
class Failure:
    """The failure to show first: a parked run's task failure or a failed run's failure."""

    title: str
    #: The recorded type key or class path (``builtins.ValueError``).
    exception_type: str
    message: str
    traceback: SafeString
    since: dt.datetime
    parked: bool

    @property
    def short_type(self) -> str:
        return self.exception_type.rsplit(".", 1)[-1]


def is_library_frame(path: str) -> bool:
    normalised = path.replace("\\", "/")
    return any(marker in normalised for marker in _LIBRARY_MARKERS) or (
        bool(_STDLIB) and path.startswith(_STDLIB)
    )


def _frames(text: str) -> list[tuple[bool, list[str]]]:
    """The traceback as blocks of lines: (is the user's frame, lines); other lines are
    blocks of their own, marked as the user's (they are the error's own text)."""
    blocks: list[tuple[bool, list[str]]] = []
    for line in text.splitlines():
        frame = _FRAME.match(line)
        if frame:
            blocks.append((not is_library_frame(frame.group("path")), [line]))
        elif line.startswith("    ") and blocks and _FRAME.match(blocks[-1][1][0]):
            blocks[-1][1].append(line)  # the source line under its frame
        else:
            blocks.append((True, [line]))
    return blocks


def traceback_html(text: str) -> SafeString:
    """The traceback with user frames highlighted and runs of library frames folded."""
    if not text:
        return mark_safe("")
    parts: list[SafeString] = []
    folded: list[str] = []

    def fold() -> None:
        if folded:
            parts.append(
                format_html(
                    '<details class="dw-library-frames"><summary>{} library frame(s)</summary>'
                    "<pre>{}</pre></details>",
                    sum(1 for line in folded if _FRAME.match(line)),
                    "\n".join(folded),
                )
            )
            folded.clear()

    for users, lines in _frames(text):
        if users:
            fold()
            css = "dw-user-frame" if _FRAME.match(lines[0]) else "dw-trace-text"
            parts.append(format_html('<pre class="{}">{}</pre>', css, "\n".join(lines)))
        else:
            folded.extend(lines)
    fold()
    return format_html(
        '<div class="dw-traceback-frames">{}</div>',
        format_html_join("", "{}", ((part,) for part in parts)),
    )


def failure_of(run: WorkflowRun) -> Failure | None:
    """What stopped the run: the failed workflow task it is parked on (open runs) or the
    failure it closed with (failed runs); None otherwise."""
    if run.status == RunStatus.FAILED:
        row = (
            WorkflowFailure.objects.filter(run_id=run.pk, source_kind="workflow_run")
            .order_by("-created_at")
            .first()
        ) or WorkflowFailure.objects.filter(run_id=run.pk).order_by("-created_at").first()
        if row is None:
            return None
        return Failure(
            "The run failed",
            row.exception_type,
            row.message,
            traceback_html(row.traceback),
            row.created_at,
            parked=False,
        )
    if run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.TERMINATED):
        return None
    parked = task_failure_of(run.pk)
    if parked is None:
        return None
    return Failure(
        f"Parked on a failed workflow task ({parked.attempts} attempt(s))",
        parked.exception_type,
        parked.message,
        traceback_html(parked.traceback),
        parked.since,
        parked=True,
    )


@dataclasses.dataclass(frozen=True)
class Span:
    label: str
    kind: str
    status: str
    scheduled: dt.datetime
    started: dt.datetime | None
    ended: dt.datetime | None
    attempts: int = 0


def spans(run_id: uuid.UUID) -> list[Span]:
    """Activities, timers and children of the run, in step order (the first STRIP_ROWS)."""
    found: list[tuple[int, Span]] = []
    for a in ActivityExecution.objects.filter(run_id=run_id).order_by("sequence")[:STRIP_ROWS]:
        label = f"{a.activity_type} (attempt {max(a.attempt_count, 1)})"
        span = Span(label, "activity", a.status, a.scheduled_at, a.started_at, a.closed_at)
        found.append((a.sequence, dataclasses.replace(span, attempts=a.attempt_count)))
    for t in Timer.objects.filter(run_id=run_id).order_by("sequence")[:STRIP_ROWS]:
        label = f"timer {t.delay_seconds:g} s" + (f" ({t.timer_kind})" if t.timer_kind else "")
        ended = t.fired_at or (t.fire_at if t.status == "fired" else None)
        found.append((t.sequence, Span(label, "timer", t.status, t.created_at, None, ended)))
    for c in ChildCall.objects.filter(parent_run_id=run_id).order_by("sequence")[:STRIP_ROWS]:
        label = f"child {c.child_instance_id}"
        found.append((c.sequence, Span(label, "child", c.status, c.created_at, None, c.closed_at)))
    found.sort(key=lambda pair: pair[0])
    return [span for _, span in found[:STRIP_ROWS]]


def strip_svg(run: WorkflowRun, rows: list[Span]) -> SafeString:
    """A Gantt-like strip: one row per span, waiting (light) then running (dark)."""
    if not rows:
        return mark_safe("")
    start = run.started_at or run.created_at
    end = max([run.closed_at or clock.now()] + [r.ended or r.scheduled for r in rows])
    total = max((end - start).total_seconds(), 0.001)
    label_w, width, row_h = 260, 900, 18

    def x(moment: dt.datetime) -> float:
        return label_w + max(0.0, (moment - start).total_seconds()) / total * (width - label_w)

    shapes: list[SafeString] = []
    for i, span in enumerate(rows):
        y = i * row_h + 2
        finish = span.ended or end
        shapes.append(_row(span, y, x(span.scheduled), x(span.started or span.scheduled)))
        begin = x(span.started or span.scheduled)
        shapes.append(
            format_html(
                '<rect class="dw-span dw-span-{} dw-span-{}" x="{}" y="{}" width="{}" '
                'height="12"><title>{}: {}, {} to {}</title></rect>',
                span.kind,
                span.status,
                f"{begin:.1f}",
                f"{y:.1f}",
                f"{max(2.0, x(finish) - begin):.1f}",
                span.label,
                span.status,
                f"{span.scheduled:%H:%M:%S}",
                f"{finish:%H:%M:%S}" if span.ended else "now",
            )
        )
    return format_html(
        '<svg id="dw-strip" viewBox="0 0 {} {}" width="100%" role="img" '
        'aria-label="activities, timers and children over time">{}</svg>',
        width,
        len(rows) * row_h + 4,
        format_html_join("", "{}", ((shape,) for shape in shapes)),
    )


def _row(span: Span, y: float, scheduled: float, started: float) -> SafeString:
    """The row's label, and the time it waited to start (scheduled to started)."""
    return format_html(
        '<text x="0" y="{}" class="dw-span-label">{}</text>'
        '<rect class="dw-span-wait" x="{}" y="{}" width="{}" height="12"></rect>',
        f"{y + 11:.1f}",
        span.label[:40],
        f"{scheduled:.1f}",
        f"{y:.1f}",
        f"{max(0.0, started - scheduled):.1f}",
    )


def page_context(run: WorkflowRun) -> dict[str, Any]:
    """The failure and the strip, for the run's change page and its timeline."""
    return {"failure": failure_of(run), "strip": strip_svg(run, spans(run.pk))}
