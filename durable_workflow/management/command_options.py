"""Options shared by the management commands that issue commands: ``--namespace`` and
``--request-id``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from durable_workflow import namespaces, text
from durable_workflow.namespaces import InvalidNamespaceError

#: Room left in the stored request id (255) for a per-run suffix.
REQUEST_ID_MAX = 200


def add_namespace_argument(parser: CommandParser) -> None:
    parser.add_argument(
        "--namespace",
        default=None,
        help="the namespace of the named instances (default: the NAMESPACE setting)",
    )


def namespace_option(options: dict[str, Any]) -> str:
    """The namespace the command acts in; a bad name is a ``CommandError``."""
    try:
        return namespaces.resolve(options.get("namespace"))
    except InvalidNamespaceError as exc:
        raise CommandError(f"--namespace: {exc.reason}") from None


def add_request_id_argument(parser: CommandParser) -> None:
    parser.add_argument(
        "--request-id",
        default=None,
        metavar="ID",
        help="run again with the same id (a retry), the first outcome comes back and "
        "nothing is done twice",
    )


def request_id_option(options: dict[str, Any]) -> str | None:
    value = options.get("request_id")
    if value is None:
        return None
    reason = text.problem(value, max_length=REQUEST_ID_MAX)
    if reason is not None:
        raise CommandError(f"--request-id {reason}")
    return str(value)
