"""Signed webhooks: a signature binds time, method, path with query and body, and works once.

Each attack of issue 18 item 1 is replayed against the routes: a signature seen
on one request and sent with another, a signed start sent twice, timestamps
outside the window either way, and the old body-only signature.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import time

import pytest

from durable_workflow import WorkflowStub, clock
from durable_workflow.webhooks import sign
from tests import isolation
from tests.conftest import require_redis
from tests.integration.test_webhooks import ORDER, row_counts

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "replay-secret"
NOW = dt.datetime(2026, 4, 10, 12, 0, tzinfo=dt.UTC)
JSON = "application/json"


@pytest.fixture(autouse=True)
def signed_webhooks(settings, inline):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"AUTH_METHOD": "signature", "SIGNATURE_SECRET": SECRET}
    clock.freeze(NOW)


def post(client, url: str, body: bytes, signature: str):
    headers = {"Content-Type": JSON, "X-Signature": signature}
    return client.post(url, data=body, content_type=JSON, headers=headers)


def get(client, url: str, signature: str):
    return client.get(url, headers={"X-Signature": signature})


def start_body(instance_id: str) -> bytes:
    return json.dumps({"workflow_id": instance_id, "order_id": 1}).encode()


def refused(response, reason: str = "unauthorized") -> bool:
    return response.status_code == 401 and response.json()["reason"] == reason


@pytest.fixture
def running():
    WorkflowStub.make("webhooks.order", "a-1").start(1)
    WorkflowStub.make("webhooks.order", "a-2").start(2)
    return row_counts()


def test_a_signature_seen_on_one_request_opens_no_other(client, running):
    describe = "/webhooks/instances/a-1/describe"
    seen = sign(SECRET, method="GET", path=describe)
    assert get(client, describe, seen).status_code == 200
    # Not its reuse that is refused: each of these is a first use of an unused signature.
    fresh = sign(SECRET, method="GET", path=describe)
    assert refused(post(client, "/webhooks/instances/a-1/terminate", b"", fresh))
    fresh = sign(SECRET, method="GET", path=describe)
    assert refused(post(client, "/webhooks/instances/a-1/cancel", b"", fresh))
    fresh = sign(SECRET, method="GET", path=describe)
    assert refused(get(client, "/webhooks/instances/a-2/describe", fresh))
    cancel = "/webhooks/instances/a-1/cancel"
    as_get = sign(SECRET, method="GET", path=cancel)  # right path, wrong method
    assert refused(post(client, cancel, b"", as_get))
    other_body = sign(SECRET, method="POST", path=cancel, body=b'{"reason": "x"}')
    assert refused(post(client, cancel, b"", other_body))
    assert row_counts() == running
    assert WorkflowStub.load("a-1").status() == "pending"


def test_the_query_string_is_bound_too(client, running):
    path = "/webhooks/instances/a-1/describe"
    signature = sign(SECRET, method="GET", path=path + "?view=short")
    assert refused(get(client, path + "?view=long", signature))
    assert refused(get(client, path, sign(SECRET, method="GET", path=path + "?view=short")))
    assert get(client, path + "?view=short", signature).status_code == 200


def test_a_replayed_signed_start_is_refused_and_writes_nothing(client):
    body = start_body("once-1")
    signature = sign(SECRET, method="POST", path=ORDER, body=body)
    assert post(client, ORDER, body, signature).status_code == 202
    after_first = row_counts()
    replay = post(client, ORDER, body, signature)
    assert refused(replay, "signature_reused")
    assert replay.json()["message"] == "This signature was already used: sign each request afresh."
    assert row_counts() == after_first
    assert after_first["WorkflowCommand"] == 1


def test_the_same_request_signed_twice_in_one_second_needs_a_nonce(client):
    body = start_body("twice-1")
    stamp = int(NOW.timestamp())
    bare = sign(SECRET, method="POST", path=ORDER, body=body, timestamp=stamp, nonce="")
    assert "n=" not in bare
    assert post(client, ORDER, body, bare).status_code == 202
    again = sign(SECRET, method="POST", path=ORDER, body=body, timestamp=stamp, nonce="")
    assert refused(post(client, ORDER, body, again), "signature_reused")
    other = sign(SECRET, method="POST", path=ORDER, body=body, timestamp=stamp, nonce="b2")
    duplicate = post(client, ORDER, body, other)  # past authentication: the engine answers
    assert (duplicate.status_code, duplicate.json()["outcome"]) == (409, "rejected_duplicate")


@pytest.mark.parametrize(
    ("offset", "accepted"), [(-301, False), (-300, True), (300, True), (301, False)]
)
def test_the_timestamp_window(client, offset, accepted):
    body = start_body(f"window{offset}")
    stamp = int(NOW.timestamp()) + offset
    response = post(
        client, ORDER, body, sign(SECRET, method="POST", path=ORDER, body=body, timestamp=stamp)
    )
    if accepted:
        assert response.status_code == 202
    else:
        assert refused(response, "signature_expired")
        assert row_counts()["WorkflowInstance"] == 0


def test_the_window_is_a_setting(client, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {
        "AUTH_METHOD": "signature",
        "SIGNATURE_SECRET": SECRET,
        "SIGNATURE_TOLERANCE_SECONDS": 5,
    }
    body = start_body("w-5")
    stale = sign(SECRET, method="POST", path=ORDER, body=body, timestamp=int(NOW.timestamp()) - 6)
    assert refused(post(client, ORDER, body, stale), "signature_expired")
    clock.advance(dt.timedelta(seconds=-1))  # the server's clock now says 5 s later than t
    assert post(client, ORDER, body, stale).status_code == 202


def test_a_body_only_signature_is_refused_with_its_own_reason(client):
    body = start_body("old-1")
    legacy = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    for header in (legacy, "sha256=" + legacy, "SHA256=" + legacy.upper()):
        response = post(client, ORDER, body, header)
        assert refused(response, "signature_outdated")
        assert "Body-only signatures are no longer accepted" in response.json()["message"]
    assert row_counts()["WorkflowInstance"] == 0


@pytest.mark.parametrize(
    "header",
    [
        "t=abc,v1=" + "0" * 64,
        "v1=" + "0" * 64,
        "t=1775822400",
        "t=1775822400,v1=xyz",
        "t=1775822400,v2=" + "0" * 64,
        "t=1775822400,n=a b,v1=" + "0" * 64,
        "t=1775822400,t=1775822400,v1=" + "0" * 64,
        "garbage",
        "",
    ],
)
def test_malformed_headers_are_a_plain_401(client, header):
    body = start_body("bad-1")
    assert refused(post(client, ORDER, body, header))


def test_an_unreachable_replay_cache_fails_closed(client, settings):
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "down": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",  # discard port: nothing answers
            "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 1, "SOCKET_TIMEOUT": 1},
        },
    }
    settings.DURABLE_WORKFLOW_WEBHOOKS = {
        "AUTH_METHOD": "signature",
        "SIGNATURE_SECRET": SECRET,
        "SIGNATURE_REPLAY_CACHE": "down",
    }
    body = start_body("down-1")
    assert refused(post(client, ORDER, body, sign(SECRET, method="POST", path=ORDER, body=body)))
    assert row_counts()["WorkflowInstance"] == 0


def test_the_replay_cache_can_be_redis(client, settings):
    require_redis(isolation.CACHE_REDIS_URL)
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "replay": isolation.redis_cache(),
    }
    settings.DURABLE_WORKFLOW_WEBHOOKS = {
        "AUTH_METHOD": "signature",
        "SIGNATURE_SECRET": SECRET,
        "SIGNATURE_REPLAY_CACHE": "replay",
    }
    body = start_body("redis-1")
    signature = sign(SECRET, method="POST", path=ORDER, body=body)
    posted = time.monotonic()
    assert post(client, ORDER, body, signature).status_code == 202
    assert refused(post(client, ORDER, body, signature), "signature_reused")
    from django.core.cache import caches

    digest = signature.rpartition("v1=")[2]
    ttl = caches["replay"].ttl("durable_workflow:webhook-signature:" + digest)
    # Kept until the window closes, t + 300 s: Redis counts down in real time, so what is
    # left is 300 s less the seconds this test has taken since (it read 296 under load).
    assert 300 - (time.monotonic() - posted) - 1 <= ttl <= 301
