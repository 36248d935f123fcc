"""Namespaces: the partition every instance, run, task and command belongs to.

An instance id is unique within its namespace, so the same id may name unrelated
workflows in two namespaces. Callers that name no namespace get the configured
default (``DURABLE_WORKFLOW["NAMESPACE"]``, itself ``"default"`` unless set).

Pure Python apart from reading the settings: the engine may import it.
"""

from __future__ import annotations

import re
from typing import Any

from durable_workflow.exceptions import InvalidValueError


class InvalidNamespaceError(InvalidValueError):
    """A namespace name is not 1 to 128 of ``a-z 0-9 . _ -`` (upper case is folded to lower
    case first; ``..`` is refused); nothing was written."""


#: The namespace rows written before namespaces existed were moved to.
DEFAULT = "default"
MAX_LENGTH = 128
_NAME = re.compile(r"[a-z0-9._-]+")


def check(value: Any, *, field: str = "namespace", max_length: int = MAX_LENGTH) -> str:
    """``value`` as a namespace name (lower-cased), or ``InvalidNamespaceError``."""
    if not isinstance(value, str):
        raise _refuse(field, f"must be a string, not {type(value).__name__}")
    if not value:
        raise _refuse(field, "must not be empty")
    if len(value) > max_length:
        raise _refuse(field, f"must be at most {max_length} characters (got {len(value)})")
    # Only ASCII survives the pattern, so NUL, surrogates and look-alike letters whose
    # lower case is ASCII (the Kelvin sign) are refused before they are folded.
    if not value.isascii() or not _NAME.fullmatch(value.lower()):
        raise _refuse(field, "may only contain letters, digits, '.', '_' and '-'")
    if ".." in value:
        raise _refuse(field, "must not contain '..'")
    return value.lower()


def default() -> str:
    """The configured default namespace (checked: a bad setting fails loudly)."""
    from durable_workflow.conf import get_settings

    return check(get_settings().NAMESPACE or DEFAULT, field='DURABLE_WORKFLOW["NAMESPACE"]')


def resolve(value: str | None, *, max_length: int = MAX_LENGTH) -> str:
    """The namespace a call means: ``value`` checked, or the default when ``None``."""
    return default() if value is None else check(value, max_length=max_length)


def instance_key(namespace: str, instance_id: str) -> str:
    """The primary key of an instance row.

    In the ``default`` namespace the key is the instance id itself, so rows and admin
    URLs from before namespaces keep theirs; elsewhere it is ``namespace/instance_id``
    (neither part may contain ``/``, so the key never names two instances).
    """
    return instance_id if namespace == DEFAULT else f"{namespace}/{instance_id}"


def _refuse(field: str, reason: str) -> InvalidNamespaceError:
    return InvalidNamespaceError(f"{field} {reason}", field=field, reason=reason)
