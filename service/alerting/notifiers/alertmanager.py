"""Prometheus Alertmanager (API v2): alerts are POSTed to /api/v2/alerts. Alertmanager expires
an alert that is not re-sent, so every firing alert routed to it is re-sent each period (all
in one request), as Prometheus does; if sustain goes away, its alerts resolve by themselves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from sustain.service.alerting import messages
from sustain.service.alerting.notifiers.base import NotifierKind, Request, Sending
from sustain.service.alerting.notifiers.target import Target
from sustain.service.schemas.notifiers import NotifierSpec
from sustain.service.strict_json import dumps


class AlertmanagerNotifier(NotifierSpec):
    kind: Literal["alertmanager"]


def alert(payload: Mapping[str, Any], link: str, now: datetime,
          valid_for: timedelta) -> dict[str, Any]:
    """One alert of a `POST /api/v2/alerts` body. A firing alert ends `valid_for` from now
    unless re-sent, so an Alertmanager resolves it by itself if sustain goes away; a resolved
    one ends when it resolved."""
    ends = payload["endsAt"] if payload["status"] == "resolved" and payload["endsAt"] \
        else (now + valid_for).isoformat()
    sent: dict[str, Any] = {"labels": dict(payload["labels"]),
                            "annotations": dict(payload["annotations"]),
                            "endsAt": ends, "generatorURL": link}
    if payload.get("startsAt"):
        sent["startsAt"] = payload["startsAt"]
    return sent


class Alertmanager(NotifierKind):
    name = "alertmanager"
    spec = AlertmanagerNotifier
    resends = True

    def request(self, target: Target, payloads: Sequence[Mapping[str, Any]],
                sending: Sending) -> Request:
        alerts = [alert(p, messages.generator_url(sending.external_url, p["fingerprint"]),
                        sending.now, sending.valid_for) for p in payloads]
        return Request(f"{target.url.rstrip('/')}/api/v2/alerts", dumps(alerts).encode(),
                       messages.json_headers())


KIND = Alertmanager()
