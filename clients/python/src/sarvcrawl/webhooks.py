"""Verifying a webhook as Standard Webhooks specify: `webhook-id`, `webhook-timestamp` and
`webhook-signature` headers, an HMAC-SHA256 of `{id}.{timestamp}.{body}` with the secret
(`whsec_` and base64), several space-separated signatures allowed (two for 24 hours after a
rotation)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any, Iterable, Mapping, Union

from .errors import WebhookVerificationError

#: How far a webhook's timestamp may be from now.
TOLERANCE_SECONDS = 5 * 60


def _key(secret: str) -> bytes:
    raw = secret[len("whsec_"):] if secret.startswith("whsec_") else secret
    try:
        return base64.b64decode(raw, validate=True)
    except ValueError as e:
        raise WebhookVerificationError("the secret is not whsec_ and base64") from e


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The `v1,<base64>` signature of a message (what the service sends)."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def verify_webhook(
    secret: Union[str, Iterable[str]],
    body: bytes,
    headers: Mapping[str, str],
    now: float | None = None,
) -> Any:
    """The event of a webhook whose raw `body` and `headers` check out against `secret` (or
    any of several secrets, during a rotation), parsed from JSON; `WebhookVerificationError`
    otherwise. Pass the body exactly as received: re-encoded JSON does not verify."""
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        msg_id = lower["webhook-id"]
        timestamp = int(lower["webhook-timestamp"])
        signatures = lower["webhook-signature"].split()
    except (KeyError, ValueError) as e:
        raise WebhookVerificationError("webhook-id, webhook-timestamp or webhook-signature is missing") from e
    now = time.time() if now is None else now
    if abs(now - timestamp) > TOLERANCE_SECONDS:
        raise WebhookVerificationError("the webhook's timestamp is too far from now")
    secrets = [secret] if isinstance(secret, str) else list(secret)
    expected = {sign(s, msg_id, timestamp, body) for s in secrets}
    if not any(hmac.compare_digest(sig, e) for sig in signatures for e in expected):
        raise WebhookVerificationError("no signature matches")
    try:
        return json.loads(body)
    except ValueError as e:
        raise WebhookVerificationError("the body is not JSON") from e
