"""``--namespace`` for the management commands that name instances."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from durable_workflow import namespaces
from durable_workflow.namespaces import InvalidNamespaceError


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
