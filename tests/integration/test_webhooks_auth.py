"""Webhook authentication: every failure is a 401 that writes nothing."""

from __future__ import annotations

import json

import pytest
from django.http import HttpRequest

from durable_workflow.exceptions import ConfigurationError
from durable_workflow.webhooks import AuthenticationFailed, WebhookAuthenticator, sign
from durable_workflow.webhooks.conf import webhook_settings
from tests.integration.test_webhooks import ORDER, UNKNOWN_UUID, row_counts

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "s3cret-token"
SECRET = "hmac-secret"


def body_for(instance_id: str) -> bytes:
    return json.dumps({"workflow_id": instance_id, "order_id": 1}).encode()


def send(client, body: bytes, url: str = ORDER, **headers: str):
    return client.post(
        url,
        data=body,
        content_type="application/json",
        headers={"Content-Type": "application/json", **headers},
    )


class AllowTenant(WebhookAuthenticator):
    def validate(self, request: HttpRequest) -> HttpRequest | None:
        if request.headers.get("X-Tenant") == "acme":
            request.webhook_caller = "tenant:acme"  # type: ignore[attr-defined]
            return request
        if request.headers.get("X-Tenant") == "boom":
            raise RuntimeError("authenticator bug")
        if request.headers.get("X-Tenant") == "none":
            return None
        raise AuthenticationFailed("unknown tenant")


@pytest.fixture(autouse=True)
def _no_broker(inline):
    """Started workflows queue their tasks in the database only."""


@pytest.fixture
def token_auth(settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"AUTH_METHOD": "token", "TOKEN": TOKEN}


@pytest.fixture
def signature_auth(settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"AUTH_METHOD": "signature", "SIGNATURE_SECRET": SECRET}


def assert_refused(response) -> None:
    assert response.status_code == 401
    assert response.json() == {"message": "Unauthorized.", "reason": "unauthorized"}


def test_token_missing_or_wrong_is_401_and_writes_nothing(client, token_auth):
    before = row_counts()
    assert_refused(send(client, body_for("t-1")))
    assert_refused(send(client, body_for("t-1"), Authorization="wrong"))
    assert_refused(send(client, body_for("t-1"), Authorization=TOKEN + "x"))
    assert_refused(send(client, body_for("t-1"), Authorization=""))
    assert row_counts() == before


def test_right_token_is_accepted_raw_or_as_bearer(client, token_auth):
    assert send(client, body_for("t-2"), Authorization=TOKEN).status_code == 202
    assert send(client, body_for("t-3"), Authorization=f"Bearer {TOKEN}").status_code == 202


def test_custom_token_header(client, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {
        "AUTH_METHOD": "token",
        "TOKEN": TOKEN,
        "TOKEN_HEADER": "X-Api-Key",
    }
    assert_refused(send(client, body_for("t-4"), Authorization=TOKEN))
    assert send(client, body_for("t-4"), **{"X-Api-Key": TOKEN}).status_code == 202


def signed(body: bytes, url: str = ORDER, secret: str = SECRET, **kwargs) -> dict[str, str]:
    return {"X-Signature": sign(secret, method="POST", path=url, body=body, **kwargs)}


def test_signature_missing_bad_or_of_a_modified_body_is_401(client, signature_auth):
    body = body_for("s-1")
    good = signed(body)
    before = row_counts()
    assert_refused(send(client, body))
    zeros = good["X-Signature"].rpartition("=")[0] + "=" + "0" * 64
    assert_refused(send(client, body, **{"X-Signature": zeros}))
    assert_refused(send(client, body, **signed(body, secret="other-secret")))
    tampered = bytearray(body)
    tampered[-3] ^= 0x01  # the replayed body with one modified byte
    assert_refused(send(client, bytes(tampered), **good))
    assert row_counts() == before
    accepted = send(client, body, **good)
    assert accepted.status_code == 202
    ingress = json.loads(accepted.content)["command_id"]
    assert ingress


def test_signature_digest_may_be_upper_case(client, signature_auth):
    body = body_for("s-2")
    header = signed(body)["X-Signature"]
    stamp, nonce, digest = header.split(",")
    upper = ",".join((stamp, nonce, digest.upper().replace("V1=", "v1=")))
    assert send(client, body, **{"X-Signature": upper}).status_code == 202


def test_custom_authenticator(client, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {
        "AUTH_METHOD": "custom",
        "AUTHENTICATOR": f"{__name__}.AllowTenant",
    }
    before = row_counts()
    for tenant in ("evil", "boom", "none"):
        assert_refused(send(client, body_for("c-1"), **{"X-Tenant": tenant}))
    assert_refused(send(client, body_for("c-1")))
    assert row_counts() == before
    response = send(client, body_for("c-1"), **{"X-Tenant": "acme"})
    assert response.status_code == 202
    from durable_workflow.models import WorkflowCommand

    command = WorkflowCommand.objects.get(id=response.json()["command_id"])
    assert command.metadata["ingress"]["caller"] == "tenant:acme"
    assert command.metadata["ingress"]["auth_method"] == "custom"
    assert command.metadata["ingress"]["auth_outcome"] == "authenticated"


def test_unloadable_authenticator_fails_closed(client, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"AUTH_METHOD": "custom", "AUTHENTICATOR": "no.such.Class"}
    assert_refused(send(client, body_for("c-2")))


def test_none_needs_debug_or_an_explicit_opt_in(client, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {}
    settings.DEBUG = False
    assert_refused(send(client, body_for("n-1")))
    settings.DEBUG = True
    assert send(client, body_for("n-1")).status_code == 202
    settings.DEBUG = False
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"ALLOW_UNAUTHENTICATED": True}
    assert send(client, body_for("n-2")).status_code == 202


def test_secret_methods_without_a_secret_fail_closed(client, settings):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"AUTH_METHOD": "token"}
    assert_refused(send(client, body_for("e-1"), Authorization=""))
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"AUTH_METHOD": "signature"}
    assert_refused(send(client, body_for("e-1"), **signed(body_for("e-1"), secret="")))


ROUTES = [
    ("post", "/webhooks/start/order-workflow"),
    ("post", "/webhooks/start/order-workflow/signals/approved-by"),
    ("post", "/webhooks/control-plane/start"),
    ("post", "/webhooks/instances/a-1/signals/approved-by"),
    ("post", "/webhooks/instances/a-1/queries/current-stage"),
    ("post", "/webhooks/instances/a-1/updates/mark-ready"),
    ("get", f"/webhooks/instances/a-1/updates/{UNKNOWN_UUID}"),
    ("post", "/webhooks/instances/a-1/cancel"),
    ("post", "/webhooks/instances/a-1/terminate"),
    ("post", "/webhooks/instances/a-1/repair"),
    ("get", "/webhooks/instances/a-1/describe"),
    ("post", f"/webhooks/instances/a-1/runs/{UNKNOWN_UUID}/signals/approved-by"),
    ("post", f"/webhooks/instances/a-1/runs/{UNKNOWN_UUID}/queries/current-stage"),
    ("post", f"/webhooks/instances/a-1/runs/{UNKNOWN_UUID}/updates/mark-ready"),
    ("get", f"/webhooks/instances/a-1/runs/{UNKNOWN_UUID}/updates/{UNKNOWN_UUID}"),
    ("post", f"/webhooks/instances/a-1/runs/{UNKNOWN_UUID}/cancel"),
    ("post", f"/webhooks/instances/a-1/runs/{UNKNOWN_UUID}/terminate"),
    ("post", f"/webhooks/instances/a-1/runs/{UNKNOWN_UUID}/repair"),
    ("get", f"/webhooks/instances/a-1/runs/{UNKNOWN_UUID}/describe"),
]


@pytest.mark.parametrize(("method", "url"), ROUTES)
def test_every_route_requires_the_credentials(client, token_auth, method, url):
    from durable_workflow import WorkflowStub

    WorkflowStub.make("webhooks.order", "a-1").start(1)
    before = row_counts()
    call = getattr(client, method)
    if method == "post":
        response = call(url, data=b"{}", content_type="application/json", headers={})
    else:
        response = call(url)
    assert_refused(response)
    assert row_counts() == before
    authorised = call(url, headers={"Authorization": TOKEN}) if method == "get" else None
    if authorised is not None:
        assert authorised.status_code in (200, 202, 404)


@pytest.mark.parametrize(
    "raw",
    [
        {"AUTH_METHOD": "password"},
        {"TOKEN": 5},
        {"MAX_BODY_BYTES": -1},
        {"MAX_BODY_BYTES": True},
        {"WORKFLOWS": "everything"},
        {"WORKFLOWS": {"alias": 3}},
        {"SURPRISE": 1},
    ],
)
def test_invalid_settings_are_refused(settings, raw):
    settings.DURABLE_WORKFLOW_WEBHOOKS = raw
    with pytest.raises(ConfigurationError):
        webhook_settings()
