"""Identifier helpers: time-ordered UUIDs, instance-id validation, ids as file names."""

from __future__ import annotations

import os
import re
import time
import uuid

from durable_workflow.exceptions import InvalidInstanceIdError

INSTANCE_ID_MAX_LENGTH = 191
_INSTANCE_ID = re.compile(r"[A-Za-z0-9._:-]+")

# Every step makes several ids: the plain functions, past the determinism guards
# (durable_workflow.unsafe_calls), whichever was imported first.
_time = getattr(time.time, "__wrapped__", time.time)
_urandom = getattr(os.urandom, "__wrapped__", os.urandom)


def uuid7(unix_ms: int | None = None, rand: bytes | None = None) -> uuid.UUID:
    """An RFC 9562 version 7 UUID: 48 bits of milliseconds, then randomness.

    Time-ordered keys keep B-tree inserts local, which matters for tables that
    grow by the million (tasks, attempts, failures).
    """
    ms = int(_time() * 1000) if unix_ms is None else unix_ms
    tail = bytearray(rand if rand is not None else _urandom(10))
    tail[0] = (tail[0] & 0x0F) | 0x70  # version 7
    tail[2] = (tail[2] & 0x3F) | 0x80  # RFC 4122 variant
    return uuid.UUID(bytes=ms.to_bytes(6, "big") + bytes(tail))


def validate_instance_id(instance_id: object) -> str:
    if not isinstance(instance_id, str) or not instance_id:
        raise InvalidInstanceIdError("a workflow instance id must be a non-empty string")
    if len(instance_id) > INSTANCE_ID_MAX_LENGTH:
        raise InvalidInstanceIdError(
            f"workflow instance id is {len(instance_id)} characters long; "
            f"at most {INSTANCE_ID_MAX_LENGTH} are allowed"
        )
    if not _INSTANCE_ID.fullmatch(instance_id):
        raise InvalidInstanceIdError(
            f"workflow instance id {instance_id!r} may only contain letters, digits, "
            "'.', '_', '-' and ':'"
        )
    return instance_id


def instance_file_name(instance_id: str) -> str:
    """A file or directory name for a valid instance id, safe on any file system.

    The id alphabet allows ``.``, ``..``, names starting with ``.`` or ``-``
    and ``:``, none of which should reach a path as they are. The mapping is
    reversible (``instance_id_from_file_name``) and never longer than the id:
    ``:`` becomes ``+``, and a leading ``.`` or ``-`` gets a ``=`` in front
    (neither ``+`` nor ``=`` can occur in an id). An invalid id raises
    ``InvalidInstanceIdError`` rather than become a path.
    """
    validate_instance_id(instance_id)
    name = instance_id.replace(":", "+")
    return "=" + name if name[0] in ".-" else name


def instance_id_from_file_name(name: str) -> str:
    """The instance id ``instance_file_name`` made ``name`` from."""
    if name.startswith("="):
        name = name[1:]
    return validate_instance_id(name.replace("+", ":"))
