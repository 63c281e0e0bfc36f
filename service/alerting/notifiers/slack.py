"""Slack incoming webhooks: one message per alert. The webhook's URL is its credential, so
it is only ever given as a secret reference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import model_validator
from pydantic_core import PydanticCustomError

from sustain.service.alerting import messages
from sustain.service.alerting.notifiers.base import NotifierKind, Request, Sending
from sustain.service.alerting.notifiers.target import Target
from sustain.service.schemas.notifiers import NotifierSpec
from sustain.service.strict_json import dumps


class SlackNotifier(NotifierSpec):
    URL_ONLY_AS_SECRET = True
    kind: Literal["slack"]

    @model_validator(mode="after")
    def _url_is_secret(self) -> SlackNotifier:
        if self.url is not None:
            raise PydanticCustomError(
                "slack_url_secret", "a Slack webhook URL is a secret: give it as "
                "url_secret_ref (env:NAME or file:/path), not url", {"field": "url"})
        return self


def body(payload: Mapping[str, Any], link: str) -> dict[str, Any]:
    """A one-message summary: state, alert name and summary, its labels, description, link."""
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


class Slack(NotifierKind):
    name = "slack"
    spec = SlackNotifier

    def request(self, target: Target, payloads: Sequence[Mapping[str, Any]],
                sending: Sending) -> Request:
        payload = payloads[0]
        link = messages.generator_url(sending.external_url, payload["fingerprint"])
        return Request(target.url, dumps(body(payload, link)).encode(),
                       messages.json_headers())


KIND = Slack()
