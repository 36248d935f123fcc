"""Signed webhook requests: the string a signature binds, its header, and the replay cache.

A caller signs the request with HMAC-SHA256 under ``SIGNATURE_SECRET`` and sends::

    X-Signature: t=<unix seconds>,n=<nonce>,v1=<hex digest>      (n= is optional)

The digest is taken over six lines joined by ``"\\n"`` (no trailing newline)::

    durable-workflow-webhook.v1
    <t, as sent>
    <nonce, as sent; empty when there is none>
    <HTTP method, upper case>
    <path with query string, as Django's request.get_full_path() gives it>
    <lowercase hex SHA-256 of the raw body (of b"" for an empty body)>

So one signature is good for one method on one path with one body, for
``SIGNATURE_TOLERANCE_SECONDS`` either side of ``t``, and only once: a verified
signature is remembered in Django's cache (``cache.add``, atomic) until its
window closes, and a second request carrying it is refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
import secrets

from django.core.cache import caches
from django.http import HttpRequest

from durable_workflow import clock

VERSION = "v1"
PREAMBLE = "durable-workflow-webhook.v1"
_CACHE_PREFIX = "durable_workflow:webhook-signature:"
_NONCE = re.compile(r"[A-Za-z0-9._~-]{1,128}")
_HEX = re.compile(r"[0-9a-f]{64}")
_TIMESTAMP = re.compile(r"[0-9]{1,12}")


class SignatureRefused(Exception):
    """Why a signature header was refused.

    ``reason`` is the public reason of the 401; ``detail`` is for the log only.
    """

    def __init__(self, reason: str, message: str, detail: str = ""):
        self.reason = reason
        self.message = message
        self.detail = detail or message
        super().__init__(self.detail)


def _unauthorized(detail: str) -> SignatureRefused:
    # A missing, malformed or wrong signature gets the same answer as any other 401.
    return SignatureRefused("unauthorized", "Unauthorized.", detail)


@dataclasses.dataclass(frozen=True)
class SignatureHeader:
    timestamp: str
    nonce: str
    digest: str


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def canonical_string(
    *, timestamp: int | str, method: str, path: str, body: bytes, nonce: str = ""
) -> str:
    """The exact text the v1 signature is computed over."""
    return "\n".join((PREAMBLE, str(timestamp), nonce, method.upper(), path, body_digest(body)))


def _digest(secret: str, text: str) -> str:
    return hmac.new(secret.encode("utf-8"), text.encode("utf-8"), hashlib.sha256).hexdigest()


def sign(
    secret: str,
    *,
    method: str,
    path: str,
    body: bytes = b"",
    timestamp: int | None = None,
    nonce: str | None = None,
) -> str:
    """The ``X-Signature`` value for one request (client code and tests).

    ``timestamp`` defaults to the engine clock's current second; ``nonce`` to a
    fresh random one, so two identical requests in the same second differ.
    """
    stamp = int(clock.now().timestamp()) if timestamp is None else int(timestamp)
    once = secrets.token_hex(8) if nonce is None else nonce
    text = canonical_string(timestamp=stamp, method=method, path=path, body=body, nonce=once)
    fields = (
        [f"t={stamp}"] + ([f"n={once}"] if once else []) + [f"{VERSION}={_digest(secret, text)}"]
    )
    return ",".join(fields)


def parse_header(value: str) -> SignatureHeader:
    """Split ``t=...,n=...,v1=...``; an old body-only signature is refused by name."""
    text = value.strip()
    if _HEX.fullmatch(text.lower()) or text[:7].lower() == "sha256=":
        raise _outdated()
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, item = part.strip().partition("=")
        if not sep or key in fields:
            raise _unauthorized("the signature header is not t=...,v1=...")
        fields[key] = item.strip()
    if VERSION not in fields or "t" not in fields or set(fields) - {"t", "n", VERSION}:
        raise _unauthorized(f"the signature header needs t= and {VERSION}= (and at most n=)")
    if not _TIMESTAMP.fullmatch(fields["t"]):
        raise _unauthorized("the signature timestamp is not a whole number of seconds")
    nonce = fields.get("n", "")
    if "n" in fields and not _NONCE.fullmatch(nonce):
        raise _unauthorized("the signature nonce is not 1-128 characters of [A-Za-z0-9._~-]")
    digest = fields[VERSION].lower()
    if not _HEX.fullmatch(digest):
        raise _unauthorized(f"the {VERSION} signature is not 64 hex digits")
    return SignatureHeader(timestamp=fields["t"], nonce=nonce, digest=digest)


def _outdated() -> SignatureRefused:
    return SignatureRefused(
        "signature_outdated",
        "Body-only signatures are no longer accepted: sign the v1 string "
        "(timestamp, method, path with query, body) and send X-Signature: t=...,v1=....",
    )


def verify(
    request: HttpRequest,
    body: bytes,
    *,
    secret: str,
    header: str,
    tolerance_seconds: int,
    cache_alias: str,
) -> None:
    """Accept the request's signature once, or raise ``SignatureRefused``."""
    raw = request.headers.get(header)
    if not isinstance(raw, str) or not raw.strip():
        raise _unauthorized(f"missing {header} header")
    parsed = parse_header(raw)
    skew = int(parsed.timestamp) - int(clock.now().timestamp())
    if abs(skew) > tolerance_seconds:
        when = "in the future" if skew > 0 else "old"
        raise SignatureRefused(
            "signature_expired",
            f"The signature timestamp is more than {tolerance_seconds} seconds {when}.",
            f"signature timestamp {parsed.timestamp} is {abs(skew)} s {when}",
        )
    text = canonical_string(
        timestamp=parsed.timestamp,
        method=request.method or "",
        path=request.get_full_path(),
        body=body,
        nonce=parsed.nonce,
    )
    if not hmac.compare_digest(parsed.digest, _digest(secret, text)):
        raise _unauthorized("the signature does not match the request")
    # Remember it until the window closes, at t + tolerance.
    _remember(parsed, cache_alias, ttl=tolerance_seconds + skew + 1)


def _remember(parsed: SignatureHeader, cache_alias: str, *, ttl: int) -> None:
    """Record the signature until its window closes; refuse one already recorded."""
    try:
        fresh = caches[cache_alias].add(_CACHE_PREFIX + parsed.digest, 1, timeout=max(ttl, 1))
    except Exception as exc:  # an unreachable cache must not let a replay through
        detail = f"replay cache {cache_alias!r} failed: {type(exc).__name__}: {exc}"
        raise _unauthorized(detail) from exc
    if not fresh:
        raise SignatureRefused(
            "signature_reused",
            "This signature was already used: sign each request afresh.",
        )
