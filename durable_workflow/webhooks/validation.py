"""Request-shape checks. Everything here runs before any row is written.

A failure raises ``RequestInvalid``, which the views turn into the 422 error
envelope ``{"message", "reason", "validation_errors"}``.
"""

from __future__ import annotations

import inspect
import json
import math
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

from durable_workflow.codec import envelope
from durable_workflow.conf import get_settings
from durable_workflow.exceptions import ConfigurationError, InvalidInstanceIdError
from durable_workflow.ids import validate_instance_id
from durable_workflow.options import (
    DEDUPLICATION_ID_MAX_LENGTH,
    DuplicateStartPolicy,
    StartOptions,
    check_deduplication_id,
)
from durable_workflow.webhooks.conf import WebhookSettings

Errors = dict[str, list[str]]


class RequestInvalid(Exception):
    def __init__(self, message: str, errors: Errors | None = None, reason: str = "invalid_request"):
        self.message = message
        self.errors = errors or {}
        self.reason = reason
        super().__init__(message)


def invalid_field(field: str, message: str, reason: str = "invalid_request") -> RequestInvalid:
    return RequestInvalid(message, {field: [message]}, reason)


# ------------------------------------------------------------------ body
def read_body(request: HttpRequest, config: WebhookSettings) -> bytes:
    """The raw body, refused (422) when it is larger than ``MAX_BODY_BYTES``."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    try:
        length = int(declared)
    except (TypeError, ValueError):
        raise invalid_field("body", "The Content-Length header is not a number.") from None
    if length > config.MAX_BODY_BYTES:
        raise _too_large(config)
    try:
        body = request.body
    except RequestDataTooBig:
        raise _too_large(config) from None
    if len(body) > config.MAX_BODY_BYTES:
        raise _too_large(config)
    return body


def _too_large(config: WebhookSettings) -> RequestInvalid:
    return invalid_field(
        "body",
        f"The request body is larger than {config.MAX_BODY_BYTES} bytes.",
        "body_too_large",
    )


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number out of range: {text}")
    return value


def _no_constants(text: str) -> Any:
    raise ValueError(f"{text} is not valid JSON")


def parse_object(body: bytes, config: WebhookSettings) -> dict[str, Any]:
    """The body as a JSON object; an empty body is ``{}``."""
    if not body.strip():
        return {}
    try:
        value = json.loads(body.decode("utf-8"), parse_float=_finite, parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        message = "The request body is not valid JSON."
        errors = {"body": [f"{message} ({exc})"[:300]]}
        raise RequestInvalid(message, errors, "malformed_json") from None
    if not isinstance(value, dict):
        raise invalid_field("body", "The request body must be a JSON object.", "malformed_json")
    _walk(value, config)
    return value


def _walk(value: Any, config: WebhookSettings) -> None:
    """Refuse nesting beyond ``MAX_JSON_DEPTH`` and text no database column can hold
    (NUL characters, lone surrogates)."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            if not storable_text(item):
                raise invalid_field(
                    "body", "The request body contains NUL characters or invalid Unicode."
                )
        elif isinstance(item, dict | list):
            if level > config.MAX_JSON_DEPTH:
                raise invalid_field(
                    "body",
                    f"The request body is nested deeper than {config.MAX_JSON_DEPTH} levels.",
                )
            if isinstance(item, dict):
                stack.extend((key, level) for key in item)
                stack.extend((child, level + 1) for child in item.values())
            else:
                stack.extend((child, level + 1) for child in item)


def storable_text(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# --------------------------------------------------------------- fields
def refuse_unknown(data: dict[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        raise RequestInvalid(
            "The request body has unknown fields.",
            {key: [f"The {key} field is not accepted here."] for key in extra},
        )


def instance_id(value: Any, field: str = "workflow_id") -> str:
    try:
        return validate_instance_id(value)
    except InvalidInstanceIdError as exc:
        raise invalid_field(field, str(exc), "invalid_workflow_id") from None


def array(data: dict[str, Any], field: str) -> list[Any]:
    value = data.get(field, [])
    if not isinstance(value, list):
        raise invalid_field(field, f"The {field} field must be an array.")
    return value


def arguments(data: dict[str, Any], field: str = "arguments") -> list[Any] | dict[str, Any]:
    value = data.get(field, [])
    if not isinstance(value, list | dict):
        raise invalid_field(field, f"The {field} field must be an array or an object.")
    return value


def on_duplicate(value: Any, field: str = "on_duplicate") -> DuplicateStartPolicy:
    try:
        return DuplicateStartPolicy(value)
    except ValueError:
        allowed = ", ".join(policy.value for policy in DuplicateStartPolicy)
        raise invalid_field(field, f"The {field} field must be one of: {allowed}.") from None


def reason(data: dict[str, Any], config: WebhookSettings) -> str | None:
    value = data.get("reason")
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > config.MAX_REASON_LENGTH:
        raise invalid_field(
            "reason", f"The reason must be a string of at most {config.MAX_REASON_LENGTH} chars."
        )
    return value or None


def wait_options(data: dict[str, Any], config: WebhookSettings) -> tuple[str, float | None]:
    wait_for = data.get("wait_for", "completed")
    if wait_for not in ("accepted", "completed"):
        raise invalid_field("wait_for", "The wait_for field must be accepted or completed.")
    if wait_for == "accepted":
        return wait_for, None
    default = config.UPDATE_WAIT_TIMEOUT_SECONDS
    if default is None:
        default = get_settings().UPDATE_WAIT_TIMEOUT_SECONDS
    timeout = data.get("wait_timeout_seconds", min(default, config.MAX_UPDATE_WAIT_SECONDS))
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 <= timeout <= config.MAX_UPDATE_WAIT_SECONDS
    ):
        raise invalid_field(
            "wait_timeout_seconds",
            f"The wait_timeout_seconds field must be a number from 0 to "
            f"{config.MAX_UPDATE_WAIT_SECONDS:g}.",
        )
    return wait_for, timeout


def deduplication_id(data: dict[str, Any], field: str = "deduplication_id") -> str | None:
    """The start's de-duplication id, if the body names one (checked as the client does)."""
    value = data.get(field)
    try:
        check_deduplication_id(value)
    except ConfigurationError:
        raise invalid_field(
            field,
            f"The {field} must be a printable string of 1 to "
            f"{DEDUPLICATION_ID_MAX_LENGTH} characters.",
        ) from None
    return value


# ----------------------------------------------------------- visibility
def start_options(data: dict[str, Any], policy: DuplicateStartPolicy) -> StartOptions:
    """``StartOptions`` from the reserved ``visibility`` object."""
    visibility = data.get("visibility", {})
    if not isinstance(visibility, dict):
        raise invalid_field("visibility", "The visibility field must be an object.")
    refuse_unknown(visibility, {"business_key", "labels", "memo"})
    labels = visibility.get("labels", {})
    if not isinstance(labels, dict) or not all(
        isinstance(v, str) and 0 < len(k) <= 64 and len(v) <= 191 for k, v in labels.items()
    ):
        raise invalid_field(
            "visibility.labels", "Labels must be an object of short strings (keys 1-64 chars)."
        )
    memo = visibility.get("memo", {})
    if not isinstance(memo, dict):
        raise invalid_field("visibility.memo", "The memo must be a JSON object.")
    _check_memo_keys(memo)
    limit = get_settings().limit("memo_size_bytes")
    if limit and len(json.dumps(memo).encode("utf-8")) > limit:
        raise invalid_field("visibility.memo", f"The memo is larger than {limit} bytes.")
    try:
        return StartOptions(
            duplicate_start_policy=policy,
            business_key=visibility.get("business_key"),
            labels=dict(labels),
            memo=dict(memo),
        )
    except ConfigurationError as exc:
        raise invalid_field("visibility.business_key", str(exc)) from None


def _check_memo_keys(memo: Any) -> None:
    stack = [memo]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if not 1 <= len(key) <= 64:
                    raise invalid_field("visibility.memo", "Memo keys must be 1-64 characters.")
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)


# -------------------------------------------------------- handle() args
def handle_arguments(cls: type, named: dict[str, Any]) -> list[Any]:
    """Match body keys to ``handle()`` parameters by name; returns positional values."""
    from durable_workflow.authoring.workflow import Workflow

    handle = getattr(cls, "handle", None)
    if handle is None or handle is Workflow.handle:
        raise invalid_field("handle", f"Workflow [{cls.__name__}] does not declare handle().")
    params = [p for p in inspect.signature(handle).parameters.values() if p.name != "self"]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    errors: Errors = {}
    known = {p.name for p in positional}
    for key in sorted(set(named) - known):
        errors[key] = [f"The {key} argument is not declared by handle()."]
    for param in params:
        if param.kind is param.KEYWORD_ONLY and param.default is param.empty:
            errors[param.name] = [f"The {param.name} argument cannot be sent over HTTP."]
    for param in positional:
        if param.name not in named and param.default is param.empty:
            errors[param.name] = [f"The {param.name} argument is required."]
    if errors:
        raise RequestInvalid("The workflow arguments are invalid.", errors, "invalid_arguments")
    supplied = [index for index, p in enumerate(positional) if p.name in named]
    last = supplied[-1] if supplied else -1
    # Trailing parameters that were not sent keep their defaults inside the body.
    return [named.get(p.name, p.default) for p in positional[: last + 1]]


def ensure_encodable(values: Any, field: str = "arguments") -> None:
    """Refuse values the payload codec cannot store (e.g. integers beyond 64 bits)."""
    try:
        envelope.encode(values, get_settings().PAYLOAD_CODEC)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise invalid_field(field, f"The {field} cannot be stored: {exc}"[:300]) from None
