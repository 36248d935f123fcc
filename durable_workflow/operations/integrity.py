"""Canonical JSON, checksums and signatures of exported documents.

``json-recursive-ksort-v1``: keys sorted at every level, no insignificant
whitespace, UTF-8 without ``\\u`` escapes for non-ASCII text, NaN refused. The
checksum covers the whole document except its ``integrity`` block.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from typing import Any

CANONICALIZATION = "json-recursive-ksort-v1"
CHECKSUM_ALGORITHM = "sha256"
SIGNATURE_ALGORITHM = "hmac-sha256"


def canonical_json(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def _body(document: dict[str, Any]) -> bytes:
    return canonical_json({k: v for k, v in document.items() if k != "integrity"})


def integrity_block(
    document: dict[str, Any], *, signing_key: str | None = None, key_id: str | None = None
) -> dict[str, Any]:
    body = _body(document)
    block: dict[str, Any] = {
        "canonicalization": CANONICALIZATION,
        "checksum_algorithm": CHECKSUM_ALGORITHM,
        "checksum": hashlib.sha256(body).hexdigest(),
    }
    if signing_key:
        block["signature_algorithm"] = SIGNATURE_ALGORITHM
        block["signature"] = hmac.new(signing_key.encode(), body, hashlib.sha256).hexdigest()
        block["key_id"] = key_id
    return block


def seal(
    document: dict[str, Any], *, signing_key: str | None = None, key_id: str | None = None
) -> dict[str, Any]:
    """``document`` with a fresh ``integrity`` block (computed last, after redaction)."""
    sealed = {k: v for k, v in document.items() if k != "integrity"}
    sealed["integrity"] = integrity_block(sealed, signing_key=signing_key, key_id=key_id)
    return sealed


@dataclasses.dataclass(frozen=True)
class Verification:
    valid: bool
    reason: str | None = None
    signature_checked: bool = False


def verify(document: dict[str, Any], *, signing_key: str | None = None) -> Verification:
    """Recompute the checksum (and the signature, when a key is given) of ``document``."""
    block = document.get("integrity")
    if not isinstance(block, dict):
        return Verification(False, "missing_integrity_block")
    if block.get("canonicalization") != CANONICALIZATION:
        return Verification(False, "unsupported_canonicalization")
    if block.get("checksum_algorithm") != CHECKSUM_ALGORITHM:
        return Verification(False, "unsupported_checksum_algorithm")
    body = _body(document)
    if not hmac.compare_digest(str(block.get("checksum")), hashlib.sha256(body).hexdigest()):
        return Verification(False, "checksum_mismatch")
    if signing_key is None:
        return Verification(True)
    if block.get("signature_algorithm") != SIGNATURE_ALGORITHM:
        return Verification(False, "signature_missing", signature_checked=True)
    expected = hmac.new(signing_key.encode(), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(str(block.get("signature")), expected):
        return Verification(False, "signature_mismatch", signature_checked=True)
    return Verification(True, signature_checked=True)
