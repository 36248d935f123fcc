"""The payload codec chain: compression, AES-GCM with key ids, hostile stored bytes, offloading."""

from __future__ import annotations

import base64
import os
from typing import Any

import pytest

from durable_workflow.codec import avro, chain, envelope, external, json_codec
from durable_workflow.codec.chain import PayloadKeyUnavailable, ZlibTransform
from durable_workflow.codec.encryption import AesGcmTransform
from durable_workflow.codec.external import MemoryDriver
from durable_workflow.exceptions import PayloadCodecError

K1 = os.urandom(32)
K2 = os.urandom(32)
VALUE: dict[str, Any] = {"card": "4111-1111-1111-1111", "amount": 12.5, "items": ["a"] * 50}


def aes(current: str = "k1", **keys: bytes) -> AesGcmTransform:
    return AesGcmTransform(keys or {"k1": K1}, current)


def test_no_chain_keeps_the_plain_envelope() -> None:
    assert chain.ENCODERS is None
    env = envelope.encode(VALUE)
    assert set(env) == {"codec", "blob"}
    assert envelope.decode(env) == VALUE


@pytest.mark.parametrize("codec", ["avro", "json"])
def test_zlib_then_aes_round_trip_and_hides_the_value(codec: str) -> None:
    with chain.using([ZlibTransform(), aes()]):
        env = envelope.encode(VALUE, codec)
        assert env["encodings"] == ["zlib", "aes-gcm"]
        plain = avro.encode_frame(VALUE) if codec == "avro" else json_codec.encode_blob(VALUE)
        assert env["size_bytes"] == len(plain)
        assert b"4111" not in base64.b64decode(env["blob"])
        assert "4111" not in str(env)
        assert envelope.decode(env, expected_codec=codec) == VALUE
        assert envelope.encodings(env) == ["zlib", "aes-gcm"]


def test_plain_envelopes_still_decode_with_a_chain_configured() -> None:
    old = envelope.encode(VALUE)
    with chain.using([ZlibTransform(), aes()]):
        assert envelope.decode(old) == VALUE


def test_a_retired_key_still_decodes_and_the_new_one_encrypts() -> None:
    with chain.using([aes("k1", k1=K1)]):
        old = envelope.encode(VALUE)
    with chain.using([aes("k2", k1=K1, k2=K2)]):
        new = envelope.encode(VALUE)
        assert envelope.decode(old) == VALUE
        assert envelope.decode(new) == VALUE
    frame = base64.b64decode(new["blob"])
    assert frame[2:4] == b"k2"


def test_unknown_key_id_is_a_typed_error() -> None:
    with chain.using([aes("k1", k1=K1)]):
        env = envelope.encode(VALUE)
    with chain.using([aes("k2", k2=K2)]), pytest.raises(PayloadKeyUnavailable) as caught:
        envelope.decode(env)
    assert caught.value.reason == "payload_key_unavailable"
    assert caught.value.key_id == "k1"


def test_encrypted_payload_without_any_key_is_a_typed_error() -> None:
    with chain.using([aes()]):
        env = envelope.encode(VALUE)
    with pytest.raises(PayloadCodecError) as caught:
        envelope.decode(env)
    assert caught.value.reason == "unknown_payload_encoding"


def _tampered(env: dict[str, Any], change: Any) -> dict[str, Any]:
    data = bytearray(base64.b64decode(env["blob"]))
    data = change(data)
    return {**env, "blob": base64.b64encode(bytes(data)).decode()}


def _flip_last(data: bytearray) -> bytearray:
    data[-1] ^= 1
    return data


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: d[:10], "corrupt_payload_encoding"),  # truncated ciphertext
        (lambda d: d[:-17], "payload_decryption_failed"),  # tag cut off, body shorter
        (_flip_last, "payload_decryption_failed"),  # wrong tag
        (lambda d: bytearray(b"\x09") + d[1:], "corrupt_payload_encoding"),  # unknown version
        (lambda d: bytearray(), "corrupt_payload_encoding"),
    ],
)
def test_hostile_ciphertext_is_a_typed_error(change: Any, reason: str) -> None:
    with chain.using([aes()]):
        env = _tampered(envelope.encode(VALUE), change)
        with pytest.raises(PayloadCodecError) as caught:
            envelope.decode(env)
    assert caught.value.reason == reason


@pytest.mark.parametrize(
    "env",
    [
        {"codec": "avro", "encodings": [], "size_bytes": 1, "blob": ""},
        {"codec": "avro", "encodings": "zlib", "size_bytes": 1, "blob": ""},
        {"codec": "avro", "encodings": ["rot13"], "size_bytes": 1, "blob": ""},
        {"codec": "avro", "encodings": ["zlib"], "size_bytes": 1, "blob": "!!"},
        {"codec": "avro", "encodings": ["zlib"], "size_bytes": 1, "blob": "AAAA"},
        {"codec": "avro", "encodings": ["zlib"], "size_bytes": -1, "blob": "AAAA"},
    ],
)
def test_malformed_chained_envelopes_are_typed_errors(env: dict[str, Any]) -> None:
    with pytest.raises(PayloadCodecError):
        envelope.decode(env)
        envelope.encoded_size(env)


def test_a_zlib_bomb_is_refused() -> None:
    import zlib

    bomb = zlib.compress(b"\0" * (2 * 1024 * 1024))
    with pytest.raises(PayloadCodecError) as caught:
        ZlibTransform(max_decoded_bytes=1024 * 1024).decode(bomb)
    assert caught.value.reason == "corrupt_payload_encoding"


def test_offloaded_payloads_hold_the_encrypted_bytes() -> None:
    driver = MemoryDriver("unit")
    big = {"secret": "4111" * 2000}
    with external.using(driver, threshold_bytes=1024, prefix="p/"), chain.using([aes()]):
        env = envelope.encode(big)
        assert envelope.is_external(env)
        assert env["encodings"] == ["aes-gcm"]
        (stored,) = driver.objects.values()
        assert b"4111" not in stored
        assert envelope.decode(env) == big
        assert envelope.encoded_size(env) == len(avro.encode_frame(big))


def test_key_validation() -> None:
    with pytest.raises(ValueError):
        AesGcmTransform({"k1": b"short"}, "k1")
    with pytest.raises(ValueError):
        AesGcmTransform({"bad id!": K1}, None)
    with pytest.raises(ValueError):
        AesGcmTransform({"k1": K1}, "k9")
    with chain.using([AesGcmTransform({"k1": K1}, None)]), pytest.raises(PayloadCodecError):
        envelope.encode(VALUE)


def _b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def test_settings_build_the_chain_and_keep_retired_keys_for_decoding() -> None:
    from django.test import override_settings

    from durable_workflow import payload_codecs

    on = {
        "PAYLOAD_CODECS": ["zlib", "aes-gcm"],
        "PAYLOAD_ENCRYPTION_KEYS": {"k1": _b64(K1)},
    }
    with override_settings(DURABLE_WORKFLOW=on):
        assert [t.name for t in chain.current()] == ["zlib", "aes-gcm"]
        assert payload_codecs.current_key_id() == "k1"
        env = envelope.encode(VALUE)
    # Encryption off, the key kept: old payloads still decode, new ones are plain.
    with override_settings(DURABLE_WORKFLOW={"PAYLOAD_ENCRYPTION_KEYS": {"k1": _b64(K1)}}):
        assert chain.ENCODERS is None
        assert envelope.decode(env) == VALUE
        assert "encodings" not in envelope.encode(VALUE)
    assert chain.ENCODERS is None


@pytest.mark.parametrize(
    "bad",
    [
        {"PAYLOAD_CODECS": ["aes-gcm"]},
        {"PAYLOAD_CODECS": ["rot13"]},
        {"PAYLOAD_CODECS": ["zlib", "zlib"]},
        {"PAYLOAD_CODECS": ["aes-gcm"], "PAYLOAD_ENCRYPTION_KEYS": {"k1": "not base64!"}},
        {"PAYLOAD_CODECS": ["aes-gcm"], "PAYLOAD_ENCRYPTION_KEYS": {"k1": _b64(b"short")}},
        {
            "PAYLOAD_CODECS": ["aes-gcm"],
            "PAYLOAD_ENCRYPTION_KEYS": {"k1": _b64(K1), "k2": _b64(K2)},
            "PAYLOAD_ENCRYPTION_KEY_ID": "k3",
        },
    ],
)
def test_bad_codec_settings_are_configuration_errors(bad: dict[str, Any]) -> None:
    from django.test import override_settings

    from durable_workflow import payload_codecs
    from durable_workflow.exceptions import ConfigurationError

    with override_settings(DURABLE_WORKFLOW=bad), pytest.raises(ConfigurationError):
        payload_codecs.configure_from_settings()
