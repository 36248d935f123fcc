"""The JSON schemas shipped in ``durable_workflow/schemas``."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

DOCTOR = "doctor.schema.json"
HISTORY_EXPORT = "history-export.schema.json"
HEALTH = "health.schema.json"
OPERATOR_METRICS = "operator-metrics.schema.json"
#: The worker-session runtime contract (normative; shipped unchanged).
WORKER_SESSIONS = "worker-sessions-runtime.schema.json"


@functools.cache
def load(name: str) -> dict[str, Any]:
    text = resources.files("durable_workflow").joinpath("schemas", name).read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def validate(document: Any, name: str) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``document`` matches the schema."""
    import jsonschema

    jsonschema.validate(
        document, load(name), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def validate_definition(document: Any, name: str, definition: str) -> None:
    """Validate against one ``$defs`` entry of a schema (e.g. ``workerSessionSnapshot``)."""
    import jsonschema

    schema = load(name)
    wrapped = {
        "$schema": schema["$schema"],
        "$defs": schema["$defs"],
        "$ref": f"#/$defs/{definition}",
    }
    jsonschema.validate(
        document, wrapped, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
