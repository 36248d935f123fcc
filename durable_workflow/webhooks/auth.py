"""Who may call the webhooks: none, token, HMAC signature, or a custom authenticator.

Every comparison of a secret is constant-time (``hmac.compare_digest``), and
every failure (missing header, wrong value, unusable configuration) is the same
401 to the caller; the log says which one it was. The exceptions are the
signature refusals an honest caller can act on (an outdated body-only
signature, a timestamp outside the window, a signature used twice), which carry
their own reason.
"""

from __future__ import annotations

import dataclasses
import hmac

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.utils.module_loading import import_string

from durable_workflow.logs import get_logger
from durable_workflow.webhooks import signing
from durable_workflow.webhooks.conf import WebhookSettings, unauthenticated_allowed

logger = get_logger("durable_workflow.webhooks")


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


class _CsrfCheck(CsrfViewMiddleware):
    def _reject(self, request: HttpRequest, reason: str) -> HttpResponse:
        raise AuthenticationFailed(f"CSRF check failed: {reason}")


def _no_view(request: HttpRequest) -> HttpResponse:
    # The middleware wants a view; the check runs before any view, so none answers.
    return HttpResponse()


def enforce_csrf(request: HttpRequest) -> None:
    """Run Django's CSRF checks (origin, referer, token) or raise ``AuthenticationFailed``.

    The webhook views are CSRF-exempt because their callers hold a secret, not
    a cookie. A custom authenticator that trusts the session cookie (a logged-in
    user) must call this first: otherwise any site the user visits could post here.
    """
    check = _CsrfCheck(_no_view)
    check.process_request(request)  # reads the CSRF cookie into request.META
    check.process_view(request, _no_view, (), {})


@dataclasses.dataclass(frozen=True)
class AuthResult:
    ok: bool
    method: str
    caller: str | None = None
    detail: str = ""
    #: Public reason and message of a refusal (``unauthorized`` unless the caller can act on it).
    reason: str = "unauthorized"
    message: str = "Unauthorized."

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


def _refuse(method: str, detail: str, **public: str) -> AuthResult:
    logger.warning("webhook authentication failed (%s): %s", method, detail)
    return AuthResult(False, method, detail=detail, **public)


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


def _signature(request: HttpRequest, body: bytes, config: WebhookSettings) -> AuthResult:
    if not config.SIGNATURE_SECRET:
        return _refuse("signature", "SIGNATURE_SECRET is not configured")
    try:
        signing.verify(
            request,
            body,
            secret=config.SIGNATURE_SECRET,
            header=config.SIGNATURE_HEADER,
            tolerance_seconds=config.SIGNATURE_TOLERANCE_SECONDS,
            cache_alias=config.SIGNATURE_REPLAY_CACHE,
        )
    except signing.SignatureRefused as refused:
        return _refuse("signature", refused.detail, reason=refused.reason, message=refused.message)
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
