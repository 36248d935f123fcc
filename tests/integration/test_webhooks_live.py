"""A real HTTP server (pytest-django's ``live_server``) driven with ``requests``."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
import requests

from durable_workflow import WorkflowStub
from durable_workflow.models import WorkflowCommand
from durable_workflow.webhooks import sign
from tests.integration.helpers import doc_block
from tests.integration.test_webhooks import worker_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "live-secret"


class Client:
    """Signs every request (method, path, body, timestamp) as an external caller would."""

    def __init__(self, base: str):
        self.origin = base.rstrip("/")
        self.prefix = "/webhooks/"
        self.session = requests.Session()

    def post(self, path: str, body: Any = None, **headers: str) -> requests.Response:
        raw = b"" if body is None else json.dumps(body).encode("utf-8")
        full = self.prefix + path
        headers = {
            "Content-Type": "application/json",
            "X-Signature": sign(SECRET, method="POST", path=full, body=raw),
            **headers,
        }
        return self.session.post(self.origin + full, data=raw, headers=headers, timeout=30)

    def get(self, path: str) -> requests.Response:
        full = self.prefix + path
        headers = {"X-Signature": sign(SECRET, method="GET", path=full)}
        return self.session.get(self.origin + full, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def live_server():
    """pytest-django's live server, started with a STATIC_URL.

    The test settings define none, and Django's static-files wrapper of the live
    server cannot start without one; the override only lasts for this module.
    """
    from django.test import override_settings
    from pytest_django.live_server_helper import LiveServer

    with override_settings(STATIC_URL="/static/"):
        server = LiveServer("127.0.0.1:0")
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def http(live_server, settings, inline):
    settings.DURABLE_WORKFLOW_WEBHOOKS = {"AUTH_METHOD": "signature", "SIGNATURE_SECRET": SECRET}
    client = Client(live_server.url)
    yield client
    client.session.close()


def eventually(check, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def stage(http: Client, instance_id: str) -> str:
    response = http.post(f"instances/{instance_id}/queries/current-stage")
    assert response.status_code == 200, response.text
    return response.json()["result"]


def test_start_signal_query_update_cancel_round_trip(http, worker_thread):  # noqa: F811
    started = http.post(
        "start/order-workflow",
        {"workflow_id": "live-1", "order_id": 42},
        **{"X-Request-Id": "live-req-1"},
    )
    assert started.status_code == 202, started.text
    assert started.json()["outcome"] == "started_new"
    eventually(lambda: stage(http, "live-1") == "waiting")

    signal = http.post("instances/live-1/signals/approved-by", {"arguments": ["Taylor"]})
    assert signal.status_code == 202
    assert signal.json()["outcome"] == "signal_received"
    eventually(lambda: stage(http, "live-1") == "approved")
    count = http.post(
        "instances/live-1/queries/events-starting-with", {"arguments": {"prefix": "approved"}}
    )
    assert count.json()["result"] == 1

    update = http.post(
        "instances/live-1/updates/mark-ready",
        {"arguments": {"approved": False, "source": "live"}, "wait_timeout_seconds": 10},
    )
    assert update.status_code == 200, update.text
    assert update.json()["outcome"] == "update_completed"
    assert update.json()["result"] == {"approved": False}
    lookup = http.get(f"instances/live-1/updates/{update.json()['update_id']}")
    assert lookup.status_code == 200
    assert lookup.json()["update_status"] == "completed"

    described = http.get("instances/live-1/describe")
    assert described.status_code == 200
    assert described.json()["run"]["wait_kind"] == "condition"

    cancel = http.post("instances/live-1/cancel", {"reason": "customer changed their mind"})
    assert cancel.status_code == 200
    assert cancel.json()["outcome"] == "cancelled"
    eventually(lambda: WorkflowStub.load("live-1").status() == "cancelled")
    closed = http.get("instances/live-1/describe").json()
    assert closed["run"]["status"] == "cancelled"
    assert closed["actions"].pop("can_archive") is True
    assert not any(closed["actions"].values())

    sources = set(WorkflowCommand.objects.filter(instance_id="live-1").values_list("source"))
    assert sources == {("webhook",)}
    first = WorkflowCommand.objects.get(id=started.json()["command_id"])
    assert first.metadata["ingress"]["request_id"] == "live-req-1"
    assert first.metadata["ingress"]["auth_method"] == "signature"


def test_live_auth_failures_write_nothing(http):
    body = {"workflow_id": "live-2", "order_id": 1}
    raw = json.dumps(body).encode()
    url = http.origin + "/webhooks/start/order-workflow"
    json_type = {"Content-Type": "application/json"}
    wrong = sign("nope", method="POST", path="/webhooks/start/order-workflow", body=raw)
    refused = requests.post(url, data=raw, headers={**json_type, "X-Signature": wrong}, timeout=30)
    assert refused.status_code == 401
    missing = requests.post(url, data=raw, headers=json_type, timeout=30)
    assert missing.status_code == 401
    form = requests.post(url, data={"workflow_id": "live-2"}, timeout=30)
    assert form.status_code == 415
    assert WorkflowCommand.objects.filter(instance_id="live-2").count() == 0
    malformed = http.post("start/order-workflow", None)
    assert malformed.status_code == 422  # empty body: order_id is missing
    unknown = http.post("no/such/route")
    assert unknown.status_code == 404
    assert unknown.headers["Content-Type"] == "application/json"


def test_the_how_to_openssl_recipe_is_accepted(http, settings):
    """The shell recipe of docs/how-to/webhooks.md, run as written against a real server."""
    import shutil
    import subprocess

    for tool in ("openssl", "curl"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is needed to run the documented recipe")
    settings.DURABLE_WORKFLOW_WEBHOOKS = {
        "AUTH_METHOD": "signature",
        "SIGNATURE_SECRET": SECRET,
        "WORKFLOWS": {"orders": "webhooks.order"},
    }
    script = doc_block("how-to/webhooks.md", "bash", "openssl dgst")
    script = script.replace("https://shop.example", http.origin)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env={"PATH": os.environ["PATH"], "SECRET": SECRET},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["outcome"] == "started_new", answer
    assert WorkflowStub.load("order-123").status() == "pending"


#: The how-to's session authenticator, run from the page itself (set by the test).
StaffSession: Any = None


def test_a_session_authenticator_enforces_csrf_over_http(
    live_server, settings, inline, monkeypatch
):
    """A logged-in browser: the cookie alone is refused; the cookie plus the token passes."""
    from django.contrib.auth.models import User

    namespace: dict[str, Any] = {}
    exec(doc_block("how-to/webhooks.md", "python", "enforce_csrf(request)"), namespace)
    monkeypatch.setitem(globals(), "StaffSession", namespace["StaffSession"])
    settings.DURABLE_WORKFLOW_WEBHOOKS = {
        "AUTH_METHOD": "custom",
        "AUTHENTICATOR": f"{__name__}.StaffSession",
    }
    settings.MIDDLEWARE = [
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
    ]
    User.objects.create_user("staff", password="pw", is_staff=True, is_superuser=True)
    browser = requests.Session()
    login_page = browser.get(live_server.url + "/admin/login/", timeout=30)
    token = browser.cookies["csrftoken"]
    logged_in = browser.post(
        live_server.url + "/admin/login/",
        data={"username": "staff", "password": "pw", "csrfmiddlewaretoken": token},
        headers={"Referer": login_page.url},
        timeout=30,
    )
    assert "sessionid" in browser.cookies, logged_in.status_code
    url = live_server.url + "/webhooks/start/order-workflow"
    body = json.dumps({"workflow_id": "csrf-live", "order_id": 1})
    forged = browser.post(
        url,
        data=body,
        headers={"Content-Type": "application/json", "Origin": "https://evil.example"},
        timeout=30,
    )
    assert forged.status_code == 401
    no_token = browser.post(
        url, data=body, headers={"Content-Type": "application/json"}, timeout=30
    )
    assert no_token.status_code == 401
    assert not WorkflowCommand.objects.filter(instance_id="csrf-live").exists()
    token = browser.cookies["csrftoken"]
    allowed = browser.post(
        url,
        data=body,
        headers={"Content-Type": "application/json", "X-CSRFToken": token},
        timeout=30,
    )
    assert allowed.status_code == 202, allowed.text
    command = WorkflowCommand.objects.get(id=allowed.json()["command_id"])
    assert command.metadata["ingress"]["caller"].startswith("user:")
