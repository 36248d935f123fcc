"""Re-encrypting stored envelopes under the current key (``manage.py workflow_reencrypt``).

An envelope needs rewriting when an ``aes-gcm`` frame in it names a key id other
than the current one.  Rewriting undoes its transforms and applies the chain
configured now, so the decoded value is unchanged, byte for byte.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from durable_workflow.codec import chain, envelope, external
from durable_workflow.codec.encryption import NAME, frame_key_id
from durable_workflow.exceptions import PayloadCodecError


def _stored_bytes(env: dict[str, Any]) -> bytes:
    raw_reference = env.get(external.ENVELOPE_KEY)
    if raw_reference is not None:
        return external.fetch(external.ExternalPayloadReference.from_dict(raw_reference))
    try:
        return base64.b64decode(env.get("blob") or "", validate=True)
    except ValueError:
        raise PayloadCodecError("invalid_payload_framing", "blob is not base64") from None


def key_id(env: Any) -> str | None:
    """The key id an encrypted envelope was written with (``None``: not encrypted)."""
    names = envelope.encodings(env)
    if NAME not in names:
        return None
    data = _stored_bytes(env)
    applied_after = names[names.index(NAME) + 1 :]
    if applied_after:
        data = chain.undo(applied_after, data)
    return frame_key_id(data)[0]


def needs_rewrite(env: Any, current_key_id: str) -> bool:
    found = key_id(env)
    return found is not None and found != current_key_id


def rewrite(env: dict[str, Any]) -> dict[str, Any]:
    """``env`` re-encoded through the chain configured now (its value unchanged)."""
    transforms = chain.ENCODERS
    if not transforms or NAME not in [t.name for t in transforms]:
        raise PayloadCodecError(
            chain.KEY_UNAVAILABLE, "re-encryption needs 'aes-gcm' in the configured chain"
        )
    plain = chain.undo(envelope.encodings(env), _stored_bytes(env))
    data = chain.apply(transforms, plain)
    name = env["codec"]
    result: dict[str, Any] = {
        "codec": name,
        chain.ENCODINGS_KEY: [t.name for t in transforms],
        chain.SIZE_KEY: env[chain.SIZE_KEY],
    }
    threshold = external.offload_threshold()
    if external.ENVELOPE_KEY in env and threshold is not None and len(data) >= threshold:
        result[external.ENVELOPE_KEY] = external.store(data, name).to_dict()
    else:
        result["blob"] = base64.b64encode(data).decode("ascii")
    return result


def rewrite_value(value: Any, visit: Callable[[dict[str, Any]], dict[str, Any] | None]) -> Any:
    """``value`` with each chained envelope inside replaced by ``visit``'s answer (if any)."""
    if isinstance(value, dict):
        if chain.ENCODINGS_KEY in value and isinstance(value.get("codec"), str):
            replaced = visit(value)
            return value if replaced is None else replaced
        return {k: rewrite_value(v, visit) for k, v in value.items()}
    if isinstance(value, list):
        return [rewrite_value(v, visit) for v in value]
    return value
