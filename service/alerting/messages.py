"""What each kind of notifier receives for an alert transition: the generic JSON webhook body
and its HMAC-SHA256 signature, a Slack incoming-webhook message, and Alertmanager v2 alerts.
Pure: built from the notification payload the alert state machine stored."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

SIGNATURE_HEADER = "X-Sustain-Signature"
TIMESTAMP_HEADER = "X-Sustain-Timestamp"
DELIVERY_HEADER = "X-Sustain-Delivery"
WEBHOOK_VERSION = "1"


def generator_url(external_url: str, fingerprint: str) -> str:
    """Where the alert can be looked at: its resource in sustain's API."""
    return f"{external_url.rstrip('/')}/api/v1/alerts/{fingerprint}"


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """`sha256=<hex>` of HMAC-SHA256 over `<timestamp>.<body>` (the timestamp, in Unix
    seconds, is signed too so a captured request cannot be replayed later)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def webhook_body(payload: Mapping[str, Any], delivery_id: int, link: str) -> dict[str, Any]:
    return {
        "version": WEBHOOK_VERSION, "delivery_id": delivery_id,
        "status": payload["status"], "transition": payload["transition"],
        "alert": {"fingerprint": payload["fingerprint"], "labels": payload["labels"],
                  "annotations": payload["annotations"], "startsAt": payload["startsAt"],
                  "endsAt": payload["endsAt"], "generatorURL": link},
    }


def slack_body(payload: Mapping[str, Any], link: str) -> dict[str, Any]:
    labels: Mapping[str, str] = payload["labels"]
    annotations: Mapping[str, str] = payload["annotations"]
    state = {"firing": "FIRING", "repeat": "STILL FIRING",
             "resolved": "RESOLVED"}[payload["transition"]]
    icon = ":white_check_mark:" if payload["transition"] == "resolved" else ":rotating_light:"
    context = " ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "alertname")
    summary = annotations.get("summary", labels.get("alertname", "alert"))
    lines = [f"{icon} *[{state}] {labels.get('alertname', 'alert')}* {summary}", context]
    if annotations.get("description"):
        lines.append(annotations["description"])
    lines.append(f"<{link}|details>")
    return {"text": "\n".join(lines)}


def alertmanager_alert(payload: Mapping[str, Any], link: str, now: datetime,
                       valid_for: timedelta) -> dict[str, Any]:
    """One alert of a `POST /api/v2/alerts` body. A firing alert ends `valid_for` from now
    unless re-sent, so an Alertmanager resolves it by itself if sustain goes away; a resolved
    one ends when it resolved."""
    ends = payload["endsAt"] if payload["status"] == "resolved" and payload["endsAt"] \
        else (now + valid_for).isoformat()
    alert: dict[str, Any] = {"labels": dict(payload["labels"]),
                             "annotations": dict(payload["annotations"]),
                             "endsAt": ends, "generatorURL": link}
    if payload.get("startsAt"):
        alert["startsAt"] = payload["startsAt"]
    return alert
