"""Task tokens: the opaque, unguessable name of one activity attempt, for async completion.

A token is the attempt's ids signed with the project's ``SECRET_KEY`` (Django's
``signing``, so ``SECRET_KEY_FALLBACKS`` keep older tokens valid through a key
rotation). It grants nothing by itself: whoever presents it may complete, fail
or heartbeat that attempt only while it is the activity's current, running
attempt.
"""

from __future__ import annotations

import uuid

from django.core import signing

_SALT = "durable_workflow.activity-task-token"
#: Longer than any token this module makes; anything longer is refused unread.
MAX_TOKEN_LENGTH = 512


def make(execution_id: uuid.UUID | str, attempt_id: uuid.UUID | str) -> str:
    return signing.dumps([str(execution_id), str(attempt_id)], salt=_SALT, compress=True)


def read(token: object) -> tuple[uuid.UUID, uuid.UUID] | None:
    """(execution id, attempt id) of a token this project signed, else ``None``."""
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    try:
        ids = signing.loads(token, salt=_SALT)
        execution_id, attempt_id = ids
        return uuid.UUID(str(execution_id)), uuid.UUID(str(attempt_id))
    except (signing.BadSignature, ValueError, TypeError):
        return None
