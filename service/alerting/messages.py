"""What the messages of every notifier kind share: the link back to an alert, the headers of
a JSON request, and the HMAC-SHA256 signature a kind may add. Each kind's own body is built in
its module of sustain.service.alerting.notifiers (the registry). Pure."""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Sustain-Signature"
TIMESTAMP_HEADER = "X-Sustain-Timestamp"
DELIVERY_HEADER = "X-Sustain-Delivery"


def generator_url(external_url: str, fingerprint: str) -> str:
    """Where the alert can be looked at: its resource in sustain's API."""
    return f"{external_url.rstrip('/')}/api/v1/alerts/{fingerprint}"


def json_headers() -> dict[str, str]:
    """The headers of every notification request (a fresh dict: kinds add their own)."""
    return {"Content-Type": "application/json", "User-Agent": "sustain"}


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """`sha256=<hex>` of HMAC-SHA256 over `<timestamp>.<body>` (the timestamp, in Unix
    seconds, is signed too so a captured request cannot be replayed later)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"
