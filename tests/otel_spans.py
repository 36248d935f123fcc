"""Reading spans in the OpenTelemetry tests: a record per finished span, a text tree,
and a JSON-lines exporter a worker process writes to (``DW_OTEL_SPANS_PATH``).

Imports neither Django nor the engine: ``tests.celery_app`` installs it first thing."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any


def span_record(span: Any) -> dict[str, Any]:
    """What the tests read of a finished span (an SDK ``ReadableSpan``)."""
    parent = span.parent
    return {
        "name": span.name,
        "trace_id": format(span.context.trace_id, "032x"),
        "span_id": format(span.context.span_id, "016x"),
        "parent_id": format(parent.span_id, "016x") if parent is not None else None,
        "kind": span.kind.name,
        "status": span.status.status_code.name,
        "attributes": dict(span.attributes or {}),
        "links": [format(link.context.span_id, "016x") for link in span.links],
        "pid": os.getpid(),
    }


def render_tree(spans: Sequence[dict[str, Any]], *, keys: Sequence[str] = ()) -> str:
    """An indented text tree of span records (children in the order they ended)."""
    ids = {s["span_id"] for s in spans}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in spans:
        parent = span["parent_id"] if span["parent_id"] in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for span in children.get(parent, []):
            attributes = span["attributes"]
            shown = [f"{k.rsplit('.', 1)[-1]}={attributes[k]}" for k in keys if k in attributes]
            detail = f"  [{', '.join(shown)}]" if shown else ""
            lines.append(f"{'  ' * depth}{span['name']}{detail}")
            walk(span["span_id"], depth + 1)

    walk(None, 0)
    return "\n".join(lines)


def _exporter_class() -> type:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class JsonLinesExporter(SpanExporter):
        """Appends one JSON object per finished span to ``path``."""

        def __init__(self, path: str) -> None:
            self.path = path
            self.lock = threading.Lock()

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            lines = "".join(json.dumps(span_record(s)) + "\n" for s in spans)
            with self.lock, open(self.path, "a", encoding="utf-8") as handle:
                handle.write(lines)
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            pass

    return JsonLinesExporter


def install_worker_exporter() -> None:
    """Called by ``tests.celery_app``: a worker started with ``DW_OTEL_SPANS_PATH``
    exports its spans there, as JSON lines, as each ends."""
    path = os.environ.get("DW_OTEL_SPANS_PATH")
    if not path:
        return
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter_class()(path)))
    trace.set_tracer_provider(provider)


def read_spans(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
