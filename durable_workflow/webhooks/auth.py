"""Who may call the webhooks: none, token, HMAC signature, or a custom authenticator.

Every comparison of a secret is constant-time (``hmac.compare_digest``), and
every failure (missing header, wrong value, unusable configuration) is the same
401 to the caller; the log says which one it was.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.utils.module_loading import import_string

from durable_workflow.webhooks.conf import WebhookSettings, unauthenticated_allowed

logger = logging.getLogger("durable_workflow.webhooks")


class AuthenticationFailed(Exception):
    """Raise from ``WebhookAuthenticator.validate`` to answer 401."""


class WebhookAuthenticator:
    """Base class for ``AUTH_METHOD = "custom"``.

    ``validate`` gets the request (``request.body`` holds the raw bytes) and
    returns it when the caller is allowed; it raises ``AuthenticationFailed``
    (or Django's ``PermissionDenied``), or returns ``None``, to refuse. A
    ``webhook_caller`` attribute set on the request is recorded as the caller label.
    """

    def validate(self, request: HttpRequest) -> HttpRequest | None:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class AuthResult:
    ok: bool
    method: str
    caller: str | None = None
    detail: str = ""

    @property
    def outcome(self) -> str:
        if not self.ok:
            return "rejected"
        return "not_required" if self.method == "none" else "authenticated"


def authenticate(request: HttpRequest, body: bytes, config: WebhookSettings) -> AuthResult:
    method = config.AUTH_METHOD
    if method == "none":
        if unauthenticated_allowed(config):
            return AuthResult(True, method)
        return _refuse(method, "AUTH_METHOD 'none' needs DEBUG or ALLOW_UNAUTHENTICATED")
    if method == "token":
        return _token(request, config)
    if method == "signature":
        return _signature(request, body, config)
    return _custom(request, config)


def _refuse(method: str, detail: str) -> AuthResult:
    logger.warning("webhook authentication failed (%s): %s", method, detail)
    return AuthResult(False, method, detail=detail)


def _header(request: HttpRequest, name: str) -> str | None:
    value = request.headers.get(name)
    return value.strip() if isinstance(value, str) else None


def _token(request: HttpRequest, config: WebhookSettings) -> AuthResult:
    if not config.TOKEN:
        return _refuse("token", "TOKEN is not configured")
    given = _header(request, config.TOKEN_HEADER)
    if not given:
        return _refuse("token", f"missing {config.TOKEN_HEADER} header")
    if given[:7].lower() == "bearer ":
        given = given[7:].strip()
    if not hmac.compare_digest(given.encode("utf-8"), config.TOKEN.encode("utf-8")):
        return _refuse("token", "wrong token")
    return AuthResult(True, "token", caller="token")


def signature_of(body: bytes, secret: str) -> str:
    """The hex HMAC-SHA256 of ``body`` that the signature header must carry."""
    return hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def _signature(request: HttpRequest, body: bytes, config: WebhookSettings) -> AuthResult:
    if not config.SIGNATURE_SECRET:
        return _refuse("signature", "SIGNATURE_SECRET is not configured")
    given = _header(request, config.SIGNATURE_HEADER)
    if not given:
        return _refuse("signature", f"missing {config.SIGNATURE_HEADER} header")
    if given[:7].lower() == "sha256=":
        given = given[7:]
    expected = signature_of(body, config.SIGNATURE_SECRET)
    if not hmac.compare_digest(given.lower().encode("utf-8"), expected.encode("ascii")):
        return _refuse("signature", "signature does not match the body")
    return AuthResult(True, "signature", caller="signature")


def _custom(request: HttpRequest, config: WebhookSettings) -> AuthResult:
    try:
        authenticator = import_string(config.AUTHENTICATOR)()
    except Exception:
        logger.exception("webhook AUTHENTICATOR %r cannot be loaded", config.AUTHENTICATOR)
        return AuthResult(False, "custom", detail="AUTHENTICATOR cannot be loaded")
    try:
        accepted = authenticator.validate(request)
    except (AuthenticationFailed, PermissionDenied) as exc:
        return _refuse("custom", str(exc) or type(exc).__name__)
    except Exception:
        # Fail closed: a broken authenticator must not let anybody in.
        logger.exception("webhook authenticator %r raised", config.AUTHENTICATOR)
        return AuthResult(False, "custom", detail="authenticator raised")
    if accepted is None or accepted is False:
        return _refuse("custom", "authenticator refused the request")
    caller = getattr(request, "webhook_caller", None)
    return AuthResult(True, "custom", caller=str(caller) if caller else "custom")
