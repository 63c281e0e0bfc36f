"""What each notifier kind is sent for a transition."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import pytest

from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.secret_policy import SecretPolicy
from sustain.service.alerting import messages
from sustain.service.alerting.notifiers import Outcome, Target, request_for, resolve
from sustain.service.alerting.notifiers.alertmanager import alert as alertmanager_alert
from sustain.service.alerting.notifiers.slack import body as slack_body
from sustain.service.policy.reach import Reach

REACH = Reach(secrets=SecretPolicy(env_globs=("TEST_*",)))

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
    text = slack_body(FIRING, "http://x/a")["text"]
    assert "[FIRING] SustainEndpointDown" in text
    assert "probe=chat" in text
    assert "<http://x/a|details>" in text
    assert "[RESOLVED]" in slack_body(RESOLVED, "http://x/a")["text"]


def test_alertmanager_alert_ends_ahead_while_firing_and_at_resolution_after() -> None:
    firing = alertmanager_alert(FIRING, "http://x/a", NOW, timedelta(minutes=4))
    assert firing["endsAt"] == (NOW + timedelta(minutes=4)).isoformat()
    assert firing["startsAt"] == FIRING["startsAt"]
    assert firing["labels"] == FIRING["labels"]
    resolved = alertmanager_alert(RESOLVED, "http://x/a", NOW, timedelta(minutes=4))
    assert resolved["endsAt"] == RESOLVED["endsAt"]
    target = Target("am", "alertmanager", "http://127.0.0.1:9093/", None, 5.0)
    url, body, _ = request_for(target, [FIRING, RESOLVED], 0, "http://x", NOW,
                               timedelta(minutes=4))
    assert url == "http://127.0.0.1:9093/api/v2/alerts"
    assert len(json.loads(body)) == 2


def test_a_missing_secret_is_a_retryable_outcome_that_names_only_the_reference(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_UNSET_URL", raising=False)
    outcome = resolve("slack", "slack", None, "env:TEST_UNSET_URL", None, 5.0, REACH)
    assert isinstance(outcome, Outcome)
    assert outcome.retryable
    assert outcome.error is not None
    assert "TEST_UNSET_URL" in outcome.error


def test_a_reference_the_policy_refuses_fails_the_delivery_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_KEY", "k-0123456789")
    monkeypatch.setenv("SUSTAIN_TEST_URL", "http://127.0.0.1:9/h")
    for url, url_ref, signing_ref in ((None, "env:SUSTAIN_TEST_URL", None),
                                      ("http://127.0.0.1:9/h", None, "env:HOOK_KEY")):
        outcome = resolve("hook", "webhook", url, url_ref, signing_ref, 5.0, REACH)
        assert isinstance(outcome, Outcome)
        assert not outcome.delivered
        assert not outcome.retryable
        assert outcome.error is not None
        assert (url_ref or signing_ref or "") in outcome.error
        assert "k-0123456789" not in outcome.error
        assert "127.0.0.1" not in outcome.error


@pytest.mark.parametrize("secret_url", ["http://169.254.169.254/latest/meta-data/",
                                        "http://metadata.google.internal/x",
                                        "http://10.9.9.9/hooks/T0123/secret-path"])
def test_a_secret_url_the_egress_policy_refuses_fails_without_naming_the_url(
        monkeypatch: pytest.MonkeyPatch, secret_url: str) -> None:
    monkeypatch.setenv("TEST_SLACK_URL", secret_url)
    reach = Reach(secrets=REACH.secrets, egress=EgressPolicy.parse(denied="10.0.0.0/8"))
    outcome = resolve("slack", "slack", None, "env:TEST_SLACK_URL", None, 5.0, reach)
    assert isinstance(outcome, Outcome)
    assert not outcome.retryable
    assert outcome.error == "egress denied: the URL of env:TEST_SLACK_URL is not allowed " \
        "(SUSTAIN_ALLOWED_TARGETS / SUSTAIN_DENIED_TARGETS)"


def test_a_plain_url_the_egress_policy_refuses_fails_naming_its_host() -> None:
    outcome = resolve("am", "alertmanager", "http://[::ffff:a9fe:a9fe]/", None, None, 5.0,
                      REACH)
    assert isinstance(outcome, Outcome)
    assert outcome.error is not None
    assert outcome.error.startswith("egress denied: ::ffff:a9fe:a9fe (169.254.169.254) is "
                                    "link-local")
