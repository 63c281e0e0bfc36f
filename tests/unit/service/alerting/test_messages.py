"""What each notifier kind is sent for a transition."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

from sustain.service.alerting import messages
from sustain.service.alerting.notifiers import Outcome, Target, request_for, resolve

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)
FIRING = {"status": "firing", "transition": "firing", "fingerprint": "ab12",
          "labels": {"alertname": "SustainEndpointDown", "probe": "chat", "severity": "page"},
          "annotations": {"summary": "chat is down", "description": "No request succeeded."},
          "startsAt": "2026-12-03T11:59:00+00:00", "endsAt": None}
RESOLVED = {**FIRING, "status": "resolved", "transition": "resolved",
            "endsAt": "2026-12-03T12:05:00+00:00"}


def test_signature_is_hmac_sha256_over_timestamp_and_body() -> None:
    body = b'{"a": 1}'
    expected = hmac.new(b"key", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert messages.sign("key", 1700000000, body) == f"sha256={expected}"
    assert messages.sign("key", 1700000001, body) != messages.sign("key", 1700000000, body)


def test_signed_webhook_request_carries_the_alert_and_delivery_id() -> None:
    target = Target("hook", "webhook", "http://127.0.0.1:9/h", "key", 5.0)
    url, body, headers = request_for(target, [FIRING], 42, "https://s.example/", NOW,
                                     timedelta(minutes=4))
    assert url == "http://127.0.0.1:9/h"
    sent = json.loads(body)
    assert sent["delivery_id"] == 42
    assert sent["alert"]["generatorURL"] == "https://s.example/api/v1/alerts/ab12"
    assert headers["X-Sustain-Delivery"] == "42"
    stamp = int(headers["X-Sustain-Timestamp"])
    assert headers["X-Sustain-Signature"] == messages.sign("key", stamp, body)


def test_unsigned_webhook_has_no_signature_headers() -> None:
    target = Target("hook", "webhook", "http://127.0.0.1:9/h", None, 5.0)
    _, _, headers = request_for(target, [FIRING], 1, "http://x", NOW, timedelta(minutes=4))
    assert "X-Sustain-Signature" not in headers


def test_slack_message_names_state_alert_and_labels() -> None:
    text = messages.slack_body(FIRING, "http://x/a")["text"]
    assert "[FIRING] SustainEndpointDown" in text
    assert "probe=chat" in text
    assert "<http://x/a|details>" in text
    assert "[RESOLVED]" in messages.slack_body(RESOLVED, "http://x/a")["text"]


def test_alertmanager_alert_ends_ahead_while_firing_and_at_resolution_after() -> None:
    firing = messages.alertmanager_alert(FIRING, "http://x/a", NOW, timedelta(minutes=4))
    assert firing["endsAt"] == (NOW + timedelta(minutes=4)).isoformat()
    assert firing["startsAt"] == FIRING["startsAt"]
    assert firing["labels"] == FIRING["labels"]
    resolved = messages.alertmanager_alert(RESOLVED, "http://x/a", NOW, timedelta(minutes=4))
    assert resolved["endsAt"] == RESOLVED["endsAt"]
    target = Target("am", "alertmanager", "http://127.0.0.1:9093/", None, 5.0)
    url, body, _ = request_for(target, [FIRING, RESOLVED], 0, "http://x", NOW,
                               timedelta(minutes=4))
    assert url == "http://127.0.0.1:9093/api/v2/alerts"
    assert len(json.loads(body)) == 2


def test_a_missing_secret_is_a_retryable_outcome_that_names_only_the_reference() -> None:
    outcome = resolve("slack", "slack", None, "env:SUSTAIN_TEST_UNSET_URL", None, 5.0)
    assert isinstance(outcome, Outcome)
    assert outcome.retryable
    assert outcome.error is not None
    assert "SUSTAIN_TEST_UNSET_URL" in outcome.error
