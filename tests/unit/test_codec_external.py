"""External payload storage in the codec: references, offload threshold, verification, drivers."""

from __future__ import annotations

import base64
import hashlib
import os
import pathlib
import subprocess
import sys
import time
from typing import Any

import pytest

import durable_workflow as dw
from durable_workflow import Activity, Workflow
from durable_workflow.codec import avro, envelope, external, json_codec
from durable_workflow.codec.external import (
    ExternalPayloadIntegrityError,
    ExternalPayloadReference,
    ExternalPayloadUnavailable,
    FilesystemDriver,
    MemoryDriver,
)
from durable_workflow.engine import commands as c
from durable_workflow.exceptions import PayloadCodecError
from tests.unit.harness import Harness

BIG = "x" * 4096
THRESHOLD = 1024


@pytest.fixture
def memory():
    driver = MemoryDriver("unit")
    with external.using(driver, threshold_bytes=THRESHOLD, prefix="p/"):
        yield driver


def reason(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(PayloadCodecError) as excinfo:
        call(*args, **kwargs)
    return excinfo.value.reason


def stored_key(env: dict[str, Any]) -> str:
    return env["external_storage"]["uri"].removeprefix("memory://unit/")


# ------------------------------------------------------------------ reference


def test_reference_round_trips_the_wire_fields() -> None:
    raw = {
        "schema": "durable-workflow.v2.external-payload-reference.v1",
        "uri": "s3://bucket/p/ab/ab",
        "sha256": "a" * 64,
        "size_bytes": 1048576,
        "codec": "avro",
        "expires_at": "2026-05-22T00:00:00Z",
    }
    reference = ExternalPayloadReference.from_dict(raw)
    assert reference.to_dict() == raw
    del raw["expires_at"]
    assert ExternalPayloadReference.from_dict(raw).to_dict() == raw
    assert "expires_at" not in ExternalPayloadReference.from_dict(raw).to_dict()


@pytest.mark.parametrize(
    "change",
    [
        {"schema": "durable-workflow.v2.external-payload-reference.v2"},
        {"schema": None},
        {"uri": ""},
        {"uri": 7},
        {"sha256": "A" * 64},
        {"sha256": "a" * 63},
        {"size_bytes": -1},
        {"size_bytes": True},
        {"size_bytes": "10"},
        {"codec": ""},
        {"expires_at": 5},
    ],
)
def test_malformed_references_fail_closed(change: dict[str, Any]) -> None:
    raw = {
        "schema": external.SCHEMA,
        "uri": "memory://unit/k",
        "sha256": "0" * 64,
        "size_bytes": 3,
        "codec": "avro",
        **change,
    }
    assert reason(ExternalPayloadReference.from_dict, raw) == "invalid_external_payload_reference"
    env = {"codec": "avro", "external_storage": raw}
    assert reason(envelope.decode, env) == "invalid_external_payload_reference"
    assert reason(envelope.encoded_size, env) == "invalid_external_payload_reference"


def test_reference_must_be_an_object() -> None:
    assert reason(ExternalPayloadReference.from_dict, ["x"]) == "invalid_external_payload_reference"


# ------------------------------------------------------------------- offload


def test_without_a_driver_every_payload_stays_inline() -> None:
    assert external.current() is None
    env = envelope.encode(BIG)
    assert set(env) == {"codec", "blob"}


def test_small_payloads_stay_inline_and_pay_nothing(memory: MemoryDriver) -> None:
    env = envelope.encode({"order": 42})
    assert env == {"codec": "avro", "blob": avro.encode_blob({"order": 42})}
    assert envelope.encode("y", "json") == {"codec": "json", "blob": '"y"'}
    assert memory.puts == 0


def test_a_large_payload_becomes_a_reference_to_its_frame(memory: MemoryDriver) -> None:
    env = envelope.encode(BIG)
    assert set(env) == {"codec", "external_storage"}
    assert env["codec"] == "avro"
    frame = avro.encode_frame(BIG)
    sha = hashlib.sha256(frame).hexdigest()
    fields = {
        "schema": "durable-workflow.v2.external-payload-reference.v1",
        "uri": f"memory://unit/p/{sha[:2]}/{sha}",
        "sha256": sha,
        "size_bytes": len(frame),
        "codec": "avro",
    }
    mac = env["external_storage"].pop("mac")
    assert env["external_storage"] == fields
    policy = external.current()
    assert policy is not None
    assert mac == policy.mark(ExternalPayloadReference.from_dict(fields)).mac
    env["external_storage"]["mac"] = mac
    assert memory.objects[f"p/{sha[:2]}/{sha}"] == frame
    assert envelope.decode(env) == BIG
    assert envelope.decode(env, expected_codec="avro") == BIG
    assert envelope.is_external(env)
    assert not envelope.is_external(envelope.encode(1))


def test_offload_is_at_or_over_the_threshold(memory: MemoryDriver) -> None:
    header = len(avro.encode_frame(""))  # header, branch byte, one length byte
    for length, offloaded in (
        (THRESHOLD - header - 2, False),  # two-byte length varint from 64 characters up
        (THRESHOLD - header - 1, True),
        (THRESHOLD - header, True),
    ):
        value = "z" * length
        size = len(avro.encode_frame(value))
        assert (size >= THRESHOLD) is offloaded, size
        assert envelope.is_external(envelope.encode(value)) is offloaded


def test_json_payloads_store_their_utf8_text(memory: MemoryDriver) -> None:
    value = {"text": "héllo ✓" * 300}
    env = envelope.encode(value, "json")
    text = json_codec.encode_blob(value)
    assert env["codec"] == "json"
    assert env["external_storage"]["codec"] == "json"
    assert env["external_storage"]["size_bytes"] == len(text.encode())
    assert memory.objects[stored_key(env)] == text.encode()
    assert envelope.decode(env, expected_codec="json") == value
    assert reason(envelope.decode, env, expected_codec="avro") == "unsupported_payload_codec"


def test_bytes_values_round_trip_through_storage(memory: MemoryDriver) -> None:
    value = {"pdf": os.urandom(5000), "pages": 3}
    env = envelope.encode(value)
    assert envelope.is_external(env)
    assert envelope.decode(env) == value


def test_identical_payloads_share_one_content_addressed_object(memory: MemoryDriver) -> None:
    first = envelope.encode([BIG, 1])
    second = envelope.encode([BIG, 1])
    assert first == second
    assert len(memory.objects) == 1
    assert memory.puts == 2  # both wrote, the second was a no-op
    assert envelope.encode([BIG, 2]) != first
    assert len(memory.objects) == 2


def test_threshold_zero_stops_offloading_but_references_still_resolve() -> None:
    driver = MemoryDriver("unit")
    with external.using(driver, threshold_bytes=THRESHOLD):
        env = envelope.encode(BIG)
    with external.using(driver, threshold_bytes=0):
        assert set(envelope.encode(BIG)) == {"codec", "blob"}
        assert envelope.decode(env) == BIG


def test_encoded_size_reports_the_real_payload_size(memory: MemoryDriver) -> None:
    for codec in ("avro", "json"):
        env = envelope.encode({"doc": BIG}, codec)
        assert envelope.is_external(env)
        with external.using(None):
            inline = envelope.encode({"doc": BIG}, codec)
            # measured without a driver: the size comes from the reference, nothing is fetched
            assert envelope.encoded_size(env) == envelope.encoded_size(inline)
        assert envelope.encoded_size(env) == env["external_storage"]["size_bytes"]


def test_envelope_needs_exactly_one_of_blob_and_reference(memory: MemoryDriver) -> None:
    env = envelope.encode(BIG)
    both = {**env, "blob": avro.encode_blob(BIG)}
    assert reason(envelope.decode, both) == "unsupported_payload_codec"
    assert reason(envelope.decode, {"codec": "avro"}) == "unsupported_payload_codec"
    unknown = {"codec": "cbor", "external_storage": env["external_storage"]}
    assert reason(envelope.decode, unknown) == "unsupported_payload_codec"


def test_reference_codec_must_match_the_envelope(memory: MemoryDriver) -> None:
    env = envelope.encode(BIG)
    mismatched = {"codec": "json", "external_storage": env["external_storage"]}
    assert reason(envelope.decode, mismatched) == "invalid_external_payload_reference"


# -------------------------------------------------------------- verification


def test_a_mutated_object_fails_closed_before_decoding(memory: MemoryDriver) -> None:
    env = envelope.encode(BIG)
    key = stored_key(env)
    original = memory.objects[key]
    memory.objects[key] = original[:-1] + b"y"  # same size, still a valid frame
    assert avro.decode_frame(memory.objects[key]) != BIG
    with pytest.raises(ExternalPayloadIntegrityError) as excinfo:
        envelope.decode(env)
    assert excinfo.value.reason == "external_payload_integrity"
    assert "SHA-256" in str(excinfo.value)
    assert excinfo.value.uri == env["external_storage"]["uri"]
    assert isinstance(excinfo.value, PayloadCodecError)


def test_a_truncated_object_fails_on_size(memory: MemoryDriver) -> None:
    env = envelope.encode(BIG)
    memory.objects[stored_key(env)] = b"\xc3\x01garbage"  # would be a framing error
    with pytest.raises(ExternalPayloadIntegrityError, match="bytes, the reference says"):
        envelope.decode(env)


def test_a_missing_object_fails_closed(memory: MemoryDriver) -> None:
    env = envelope.encode(BIG)
    memory.objects.clear()
    with pytest.raises(ExternalPayloadIntegrityError, match="missing"):
        envelope.decode(env)


def test_a_reference_without_a_driver_is_refused() -> None:
    driver = MemoryDriver("unit")
    with external.using(driver, threshold_bytes=THRESHOLD):
        env = envelope.encode(BIG)
    assert reason(envelope.decode, env) == "external_payload_storage_not_configured"


def test_a_uri_the_driver_does_not_own_is_refused(memory: MemoryDriver) -> None:
    env = envelope.encode(BIG)
    foreign = {**env["external_storage"], "uri": "memory://other/" + stored_key(env)}
    assert (
        reason(envelope.decode, {"codec": "avro", "external_storage": foreign})
        == "untrusted_external_payload_reference"
    )
    policy = external.current()
    assert policy is not None
    marked = policy.mark(ExternalPayloadReference.from_dict(foreign)).to_dict()
    with pytest.raises(PayloadCodecError, match="does not own") as refused:
        envelope.decode({"codec": "avro", "external_storage": marked})
    assert refused.value.reason == "untrusted_external_payload_reference"


class Broken:
    def put(self, key: str, data: bytes) -> str:
        raise OSError("bucket unreachable")

    def get(self, uri: str) -> bytes:
        raise TimeoutError("read timed out")

    def delete(self, uri: str) -> None:
        raise OSError("nope")


def test_driver_failures_are_unavailable_not_codec_errors(memory: MemoryDriver) -> None:
    env = envelope.encode(BIG)
    with external.using(Broken(), threshold_bytes=THRESHOLD):
        with pytest.raises(ExternalPayloadUnavailable, match="bucket unreachable") as put:
            envelope.encode(BIG)
        assert not isinstance(put.value, PayloadCodecError)
        with pytest.raises(ExternalPayloadUnavailable, match="read timed out"):
            envelope.decode(env)
        assert envelope.encode("small") == {"codec": "avro", "blob": avro.encode_blob("small")}


def test_encode_rejects_bad_values_before_writing(memory: MemoryDriver) -> None:
    assert reason(envelope.encode, [BIG, 2**63]) == "integer_overflow"
    assert memory.puts == 0


# --------------------------------------------------------------------- cache


def test_verified_bytes_are_cached_and_decoded_fresh_each_time(memory: MemoryDriver) -> None:
    env = envelope.encode({"items": [BIG]})
    gets = []
    original_get = memory.get
    memory.get = lambda uri: gets.append(uri) or original_get(uri)  # type: ignore[method-assign]
    first = envelope.decode(env)
    first["items"].append("mutated by workflow code")
    second = envelope.decode(env)
    assert second == {"items": [BIG]}
    assert first is not second
    assert len(gets) == 1
    external.clear_cache()
    memory.objects[stored_key(env)] = b"0" * env["external_storage"]["size_bytes"]
    with pytest.raises(ExternalPayloadIntegrityError):
        envelope.decode(env)
    assert len(gets) == 2


def test_failed_verification_caches_nothing(memory: MemoryDriver) -> None:
    env = envelope.encode(BIG)
    key = stored_key(env)
    good = memory.objects[key]
    memory.objects[key] = b"1" * len(good)
    with pytest.raises(ExternalPayloadIntegrityError):
        envelope.decode(env)
    memory.objects[key] = good
    assert envelope.decode(env) == BIG


def test_cache_is_bounded_by_entries_and_bytes() -> None:
    from durable_workflow.codec.external_cache import VerifiedCache

    cache = VerifiedCache(max_entries=2, max_bytes=10)
    cache.put(("a", "", 4, "avro"), b"aaaa")
    cache.put(("b", "", 4, "avro"), b"bbbb")
    cache.put(("c", "", 4, "avro"), b"cccc")
    assert len(cache) == 2 and cache.get(("a", "", 4, "avro")) is None
    cache.put(("d", "", 9, "avro"), b"d" * 9)
    assert len(cache) == 1
    cache.put(("e", "", 11, "avro"), b"e" * 11)  # larger than the ceiling: not kept
    assert cache.get(("e", "", 11, "avro")) is None
    cache.discard("d")
    assert len(cache) == 0


def test_delete_forgets_cached_bytes(memory: MemoryDriver) -> None:
    env = envelope.encode(BIG)
    assert envelope.decode(env) == BIG
    assert external.delete(ExternalPayloadReference.from_dict(env["external_storage"]))
    assert memory.objects == {}
    with pytest.raises(ExternalPayloadIntegrityError, match="missing"):
        envelope.decode(env)


# ------------------------------------------------------------------ registry


def test_using_restores_the_previous_policy() -> None:
    outer, inner = MemoryDriver("outer"), MemoryDriver("inner")
    with external.using(outer, threshold_bytes=10) as policy:
        assert policy is external.current()
        with external.using(inner):
            assert external.current().driver is inner  # type: ignore[union-attr]
        assert external.current() is policy
    assert external.current() is None


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"threshold_bytes": -1}, ValueError),
        ({"threshold_bytes": 1.5}, TypeError),
        ({"prefix": "/abs/"}, ValueError),
        ({"prefix": "a/../b/"}, ValueError),
        ({"prefix": "a//"}, ValueError),
    ],
)
def test_policy_is_validated(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        external.StoragePolicy(MemoryDriver(), **kwargs)


def test_a_driver_needs_put_get_and_delete() -> None:
    class Half:
        def put(self, key: str, data: bytes) -> str:
            return key

        def get(self, uri: str) -> bytes:
            return b""

    with pytest.raises(TypeError, match="delete"):
        external.StoragePolicy(Half())  # type: ignore[arg-type]
    assert isinstance(MemoryDriver(), external.PayloadStorageDriver)
    assert isinstance(FilesystemDriver("/tmp"), external.PayloadStorageDriver)


def test_references_finds_every_reference_in_a_row(memory: MemoryDriver) -> None:
    a, b = envelope.encode([BIG, "a"]), envelope.encode([BIG, "b"])
    row = {
        "arguments": a,
        "nested": [{"result": b}, {"result": envelope.encode(1)}],
        "junk": {"external_storage": {"schema": external.SCHEMA, "uri": ""}},
    }
    found = {r.uri for r in external.references(row)}
    assert found == {a["external_storage"]["uri"], b["external_storage"]["uri"]}
    assert list(external.references([1, "x", None])) == []


def test_the_codec_stays_importable_without_django() -> None:
    code = (
        "import sys; import durable_workflow.codec.external, durable_workflow.codec.envelope; "
        "assert 'django' not in sys.modules; assert 'celery' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})


# ------------------------------------------------------------------- drivers


def test_filesystem_driver_round_trip(tmp_path: pathlib.Path) -> None:
    driver = FilesystemDriver(tmp_path / "store")
    uri = driver.put("p/ab/abc", b"payload")
    assert uri == (tmp_path / "store" / "p" / "ab" / "abc").resolve().as_uri()
    assert uri.startswith("file:///")
    assert driver.get(uri) == b"payload"
    assert [p.name for p in (tmp_path / "store" / "p" / "ab").iterdir()] == ["abc"]  # no temp
    written = driver.last_modified(uri)
    assert written is not None and abs(written - time.time()) < 60
    driver.delete(uri)
    driver.delete(uri)  # missing is fine
    assert driver.last_modified(uri) is None
    with pytest.raises(FileNotFoundError):
        driver.get(uri)


def test_filesystem_put_of_an_existing_object_only_refreshes_its_time(
    tmp_path: pathlib.Path,
) -> None:
    driver = FilesystemDriver(tmp_path)
    uri = driver.put("k", b"same")
    path = tmp_path / "k"
    os.utime(path, (1_000_000, 1_000_000))
    inode = path.stat().st_ino
    assert driver.put("k", b"same") == uri
    assert path.stat().st_ino == inode
    assert path.stat().st_mtime > 1_000_000
    driver.put("k", b"longer bytes")  # a partial or foreign object of another size is replaced
    assert driver.get(uri) == b"longer bytes"


def test_filesystem_driver_refuses_uris_outside_its_root(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "store"
    driver = FilesystemDriver(root)
    (tmp_path / "secret").write_bytes(b"top secret")
    root.mkdir()
    (root / "link").symlink_to(tmp_path / "secret")
    for uri in (
        (tmp_path / "secret").as_uri(),
        root.as_uri() + "/../secret",
        root.as_uri() + "/link",
        root.as_uri(),
        "file://otherhost" + str(root / "k"),
        "s3://bucket/k",
        str(root / "k"),
    ):
        with pytest.raises(ValueError):
            driver.get(uri)
        with pytest.raises(ValueError):
            driver.delete(uri)
    for key in ("", "/abs", "a/../b", "a//b", "a\\b", "./a"):
        with pytest.raises(ValueError):
            driver.put(key, b"x")


def test_filesystem_driver_end_to_end_with_tampering(tmp_path: pathlib.Path) -> None:
    with external.using(FilesystemDriver(tmp_path), threshold_bytes=THRESHOLD):
        env = envelope.encode({"doc": BIG})
        path = pathlib.Path(env["external_storage"]["uri"].removeprefix("file://"))
        assert path.is_relative_to(tmp_path) and path.read_bytes()[:2] == avro.MAGIC
        assert envelope.decode(env) == {"doc": BIG}
        external.clear_cache()
        data = bytearray(path.read_bytes())
        data[-1] ^= 1
        path.write_bytes(bytes(data))
        with pytest.raises(ExternalPayloadIntegrityError):
            envelope.decode(env)


def test_memory_driver_scopes_uris_by_name() -> None:
    driver = MemoryDriver("a")
    uri = driver.put("k", b"v")
    assert uri == "memory://a/k"
    with pytest.raises(ValueError):
        MemoryDriver("b").get(uri)
    with pytest.raises(FileNotFoundError):
        MemoryDriver("a").get(uri)


# ------------------------------------------------------------------- runtime


class Produce(Activity):
    type_key = "unit.external.produce"

    def handle(self, data: str) -> str:
        return data


class BigData(Workflow):
    type_key = "unit.external.big-data"

    def handle(self, data: str) -> int:
        result = dw.activity(Produce, data)
        result += "!"  # strings are immutable; lists below check fresh objects
        return len(result)


def test_the_runtime_offloads_command_arguments_and_reads_references(
    memory: MemoryDriver,
) -> None:
    harness = Harness(BigData, BIG)
    started = harness.events[0].payload["arguments"]
    assert envelope.is_external(started)
    runtime = harness.runtime()
    runtime.feed(harness.events)
    [command] = runtime.take_commands()
    assert isinstance(command, c.ScheduleActivity)
    assert envelope.is_external(command.arguments)
    assert envelope.decode(command.arguments) == [BIG]
    assert command.arguments["external_storage"]["uri"] == started["external_storage"]["uri"]
    assert envelope.encoded_size(command.arguments) == len(avro.encode_frame([BIG]))
    harness.task()
    harness.complete(1, BIG * 2)
    assert envelope.is_external(harness.events[-1].payload["result"])
    harness.task()
    assert harness.events[-1].event_type == "WorkflowCompleted"
    assert envelope.decode(harness.events[-1].payload["result"]) == len(BIG) * 2 + 1
    external.clear_cache()  # a cold replay elsewhere: fetched and verified again
    replay = harness.runtime()
    replay.feed(harness.events)
    assert replay.take_commands() == []


def test_base64_inline_blob_is_unchanged_by_the_offload_path(memory: MemoryDriver) -> None:
    for value in (None, 7, "héllo", {"a": [1, 2.5, b"\x00"]}):
        env = envelope.encode(value)
        assert env["blob"] == base64.b64encode(avro.encode_frame(value)).decode()
