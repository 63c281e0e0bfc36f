"""Notifiers, one module per kind (as Gatus keeps one folder per alert provider): webhook,
slack and alertmanager, each one object implementing base.NotifierKind, held in REGISTRY.
A new kind is a new module here and one more entry in REGISTRY: its configuration, its
request and its re-sends live in that module, the API and the config file accept it, and
the database needs no migration.

What is the same for every kind lives beside them: target.py resolves a notifier's secret
references and checks its URL, transport.py sends one request and reads its answer (raw,
bounded)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeAlias

from sustain.service.alerting.notifiers import alertmanager, slack, webhook
from sustain.service.alerting.notifiers.base import NotifierKind, Request, Sending
from sustain.service.alerting.notifiers.registry import Registry
from sustain.service.alerting.notifiers.target import Target, resolve
from sustain.service.alerting.notifiers.transport import (
    MAX_RESPONSE_BYTES,
    QUICK_TRIES,
    RETRYABLE_STATUS,
    Outcome,
    by_status,
    drain_raw,
    post,
)
from sustain.service.schemas.notifiers import NotifierSpec

__all__ = ["MAX_RESPONSE_BYTES", "QUICK_TRIES", "REGISTRY", "RETRYABLE_STATUS",
           "NotifierCreate", "NotifierKind", "Outcome", "Registry", "Request", "Sending",
           "Target", "by_status", "drain_raw", "post", "request_for", "resolve"]

REGISTRY = Registry([webhook.KIND, slack.KIND, alertmanager.KIND])
"""Every notifier kind this build knows."""

if TYPE_CHECKING:
    NotifierCreate: TypeAlias = NotifierSpec
else:
    NotifierCreate = REGISTRY.create_type()
    """The body creating a notifier (REST and config file): one of the kinds' specs."""


def request_for(target: Target, payloads: Sequence[Mapping[str, Any]], delivery_id: int,
                external_url: str, now: datetime, valid_for: timedelta) -> Request:
    """URL, body and headers of the request carrying `payloads` to `target`, as its kind
    builds them (one alert, unless the kind re-sends every firing alert at once)."""
    return REGISTRY.of(target.kind).request(
        target, payloads, Sending(delivery_id, external_url, now, valid_for))
