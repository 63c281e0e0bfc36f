"""The generic JSON webhook: one alert per request, optionally signed with HMAC-SHA256 over
the timestamp and body (X-Sustain-Timestamp, X-Sustain-Signature) so a receiver can tell it
came from sustain and is not a replay."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from sustain.service.alerting import messages
from sustain.service.alerting.notifiers.base import NotifierKind, Request, Sending
from sustain.service.alerting.notifiers.target import Target
from sustain.service.schemas.endpoints import SecretRef
from sustain.service.schemas.notifiers import NotifierSpec
from sustain.service.strict_json import dumps

WEBHOOK_VERSION = "1"


class WebhookNotifier(NotifierSpec):
    kind: Literal["webhook"]
    signing_secret_ref: SecretRef | None = Field(
        default=None, description="env:NAME or file:/path of the HMAC-SHA256 key; requests "
        "then carry X-Sustain-Timestamp and X-Sustain-Signature.")


def body(payload: Mapping[str, Any], delivery_id: int, link: str) -> dict[str, Any]:
    """The JSON body of one alert's transition (version 1 of the webhook format)."""
    return {
        "version": WEBHOOK_VERSION, "delivery_id": delivery_id,
        "status": payload["status"], "transition": payload["transition"],
        "alert": {"fingerprint": payload["fingerprint"], "labels": payload["labels"],
                  "annotations": payload["annotations"], "startsAt": payload["startsAt"],
                  "endsAt": payload["endsAt"], "generatorURL": link},
    }


class Webhook(NotifierKind):
    name = "webhook"
    spec = WebhookNotifier

    def request(self, target: Target, payloads: Sequence[Mapping[str, Any]],
                sending: Sending) -> Request:
        payload = payloads[0]
        link = messages.generator_url(sending.external_url, payload["fingerprint"])
        data = dumps(body(payload, sending.delivery_id, link)).encode()
        headers = messages.json_headers()
        headers[messages.DELIVERY_HEADER] = str(sending.delivery_id)
        if target.signing_secret is not None:
            stamp = int(time.time())  # Unix seconds, as the receiver checks them
            headers[messages.TIMESTAMP_HEADER] = str(stamp)
            headers[messages.SIGNATURE_HEADER] = messages.sign(target.signing_secret, stamp,
                                                               data)
        return Request(target.url, data, headers)


KIND = Webhook()
