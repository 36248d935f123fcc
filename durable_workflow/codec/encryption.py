"""AES-GCM encryption as a link of the payload codec chain (``durable-workflow[encryption]``).

Each encrypted payload is one frame::

    version (1 byte, 1) | key id length (1 byte) | key id (UTF-8) | nonce (12 bytes)
    | ciphertext | tag (16 bytes)

The version and key id are authenticated as associated data, so a frame cannot
be moved to another key id.  The key id travels with the payload: keys rotate
by adding a new key and making it current; payloads written under a retired
key decode as long as that key stays in ``PAYLOAD_ENCRYPTION_KEYS``, and
``manage.py workflow_reencrypt`` rewrites them under the current key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from durable_workflow.codec.chain import (
    CORRUPT,
    DECRYPTION_FAILED,
    KEY_UNAVAILABLE,
    PayloadKeyUnavailable,
)
from durable_workflow.exceptions import PayloadCodecError

if TYPE_CHECKING:  # the optional extra is imported only when a transform is built
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NAME: Final = "aes-gcm"
VERSION: Final = 1
NONCE_BYTES: Final = 12
TAG_BYTES: Final = 16
KEY_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


class AesGcmTransform:
    """Encrypts with the current key; decrypts with whichever key a frame names."""

    name = NAME

    def __init__(self, keys: Mapping[str, bytes], current_key_id: str | None):
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if current_key_id is not None and current_key_id not in keys:
            raise ValueError(f"current payload key id {current_key_id!r} is not among the keys")
        self._ciphers: dict[str, AESGCM] = {}
        for key_id, key in keys.items():
            if not KEY_ID.fullmatch(key_id):
                raise ValueError(
                    f"payload key id {key_id!r} must be 1-64 characters of A-Z a-z 0-9 . _ : -"
                )
            if len(key) not in (16, 24, 32):
                raise ValueError(f"payload key {key_id!r} must be 16, 24 or 32 bytes long")
            self._ciphers[key_id] = AESGCM(key)
        self.current_key_id = current_key_id

    def __repr__(self) -> str:
        return f"AesGcmTransform(keys={sorted(self._ciphers)}, current={self.current_key_id!r})"

    def key_ids(self) -> list[str]:
        return sorted(self._ciphers)

    def encode(self, data: bytes) -> bytes:
        if self.current_key_id is None:
            raise PayloadCodecError(
                KEY_UNAVAILABLE,
                "no current payload key (PAYLOAD_ENCRYPTION_KEY_ID) to encrypt with",
            )
        header = _header(self.current_key_id)
        nonce = os.urandom(NONCE_BYTES)
        return header + nonce + self._ciphers[self.current_key_id].encrypt(nonce, data, header)

    def decode(self, data: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag

        key_id, body_at = frame_key_id(data)
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise PayloadKeyUnavailable(key_id)
        nonce = data[body_at : body_at + NONCE_BYTES]
        try:
            return bytes(cipher.decrypt(nonce, data[body_at + NONCE_BYTES :], data[:body_at]))
        except InvalidTag:
            raise PayloadCodecError(
                DECRYPTION_FAILED,
                f"payload does not authenticate under key {key_id!r} (altered or wrong key)",
            ) from None


def _header(key_id: str) -> bytes:
    raw = key_id.encode("ascii")
    return bytes((VERSION, len(raw))) + raw


def frame_key_id(data: bytes) -> tuple[str, int]:
    """The key id an encrypted frame names, and where its nonce starts (no key needed)."""
    if len(data) < 2 or data[0] != VERSION:
        raise PayloadCodecError(CORRUPT, "aes-gcm: unknown frame version or empty frame")
    end = 2 + data[1]
    if len(data) < end + NONCE_BYTES + TAG_BYTES:
        raise PayloadCodecError(CORRUPT, "aes-gcm: frame is truncated")
    try:
        key_id = data[2:end].decode("ascii")
    except UnicodeDecodeError:
        raise PayloadCodecError(CORRUPT, "aes-gcm: key id is not ASCII") from None
    if not KEY_ID.fullmatch(key_id):
        raise PayloadCodecError(CORRUPT, "aes-gcm: malformed key id")
    return key_id, end
