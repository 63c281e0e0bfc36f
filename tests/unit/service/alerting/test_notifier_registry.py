"""Every notifier kind lives in one module of sustain.service.alerting.notifiers and is known
through one registry: its configuration is the API's body, and it builds its own request."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest
from pydantic import TypeAdapter, ValidationError

from sustain.probes.client.secret_policy import SecretPolicy
from sustain.service.alerting.notifiers import (
    REGISTRY,
    NotifierCreate,
    NotifierKind,
    Registry,
    Request,
    Sending,
    Target,
    request_for,
    resolve,
)
from sustain.service.errors import FieldError
from sustain.service.policy.reach import Reach
from sustain.service.schemas.notifiers import NotifierSpec

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)
FIRING = {"status": "firing", "transition": "firing", "fingerprint": "ab12",
          "labels": {"alertname": "SustainEndpointDown", "probe": "chat"},
          "annotations": {"summary": "chat is down"},
          "startsAt": "2026-12-03T11:59:00+00:00", "endsAt": None}
RECEIVER = "http://127.0.0.1:9/hook"
REACH = Reach(secrets=SecretPolicy(env_globs=("TEST_*",)))


def a_config(kind: str) -> dict[str, Any]:
    """The least configuration of `kind` its spec accepts: a plain URL, or else the URL as a
    secret reference (a kind whose URLs are secrets)."""
    spec = REGISTRY.of(kind).spec
    for where in ({"url": RECEIVER}, {"url_secret_ref": "env:TEST_NOTIFIER_URL"}):
        config = {"name": f"n-{kind}", "kind": kind, **where}
        try:
            spec.model_validate(config)
        except ValidationError:
            continue
        return config
    raise AssertionError(f"{kind}: neither a url nor a url_secret_ref is accepted")


@pytest.mark.parametrize("kind", REGISTRY.names())
def test_every_kind_round_trips_its_config_through_the_api_body(kind: str) -> None:
    body = TypeAdapter(NotifierCreate)
    parsed = body.validate_python(a_config(kind))
    assert isinstance(parsed, REGISTRY.of(kind).spec)
    sent = parsed.model_dump(mode="json")
    assert sent["kind"] == kind
    assert body.validate_python(sent) == parsed
    assert body.validate_json(body.dump_json(parsed)) == parsed


@pytest.mark.parametrize("kind", REGISTRY.names())
def test_every_kind_builds_a_json_request_to_its_receiver(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_NOTIFIER_URL", RECEIVER)
    config = a_config(kind)
    target = resolve(config["name"], kind, config.get("url"), config.get("url_secret_ref"),
                     None, 5.0, REACH)
    assert isinstance(target, Target)
    url, body, headers = request_for(target, [FIRING], 7, "https://s.example", NOW,
                                     timedelta(minutes=4))
    assert url.startswith(RECEIVER)
    assert headers["Content-Type"] == "application/json"
    assert "https://s.example/api/v1/alerts/ab12" in json.dumps(json.loads(body))


def test_the_api_body_documents_every_kind_and_refuses_others() -> None:
    body = TypeAdapter(NotifierCreate)
    documented = json.dumps(body.json_schema())
    assert all(f'"{kind}"' in documented for kind in REGISTRY.names())
    with pytest.raises(ValidationError, match="kind"):
        body.validate_python({"name": "p", "kind": "pager", "url": RECEIVER})


def test_a_patch_is_checked_by_the_spec_of_its_kind() -> None:
    stored: dict[str, object] = {
        "name": "s", "url": None, "url_secret_ref": "env:TEST_URL", "signing_secret_ref": None,
        "match": {}, "send_resolved": True, "enabled": True, "timeout_s": 5.0}
    REGISTRY.check_merged("slack", stored)
    with pytest.raises(FieldError) as refused:
        REGISTRY.check_merged("slack", {**stored, "url": RECEIVER, "url_secret_ref": None})
    assert refused.value.field == "url"
    with pytest.raises(FieldError) as signed:
        REGISTRY.check_merged("alertmanager", {**stored, "url": RECEIVER,
                                               "url_secret_ref": None,
                                               "signing_secret_ref": "env:TEST_KEY"})
    assert signed.value.field == "signing_secret_ref"


class _Spec(NotifierSpec):
    kind: Literal["x"]


class _Kind(NotifierKind):
    spec = _Spec

    def __init__(self, name: str) -> None:
        self.name = name  # type: ignore[misc] # a ClassVar set per object, for this test

    def request(self, target: Target, payloads: Sequence[Mapping[str, Any]],
                sending: Sending) -> Request:
        return Request(target.url, f"{len(payloads)} {sending.delivery_id}".encode(), {})


@pytest.mark.parametrize("name", ["webhook", "y", "a-kind-named-too-long"])
def test_a_kind_that_cannot_be_told_apart_or_stored_is_refused(name: str) -> None:
    registry = Registry(REGISTRY.of(k) for k in REGISTRY.names())
    with pytest.raises(ValueError, match="notifier kind"):
        registry.register(_Kind(name))
