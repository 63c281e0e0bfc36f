"""What one kind of notifier is: the one interface every module of this package implements.

A kind is one object holding everything particular to it: the model of its configuration
(the API body and the config file's entry alike, validated there and only there), the
request a delivery becomes (URL, body, headers, signing), and whether its receiver wants the
firing alerts re-sent every period (Alertmanager). Everything else (storage, routing,
retries, silences, the transport) is the same for every kind and never asks which it is."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, NamedTuple

from sustain.service.alerting.notifiers.target import Target
from sustain.service.schemas.notifiers import NotifierSpec

MAX_KIND_CHARS = 16
"""A kind's name is stored in notifiers.kind, a VARCHAR(16)."""


class Request(NamedTuple):
    """What is POSTed to a receiver: its URL, body bytes and headers."""

    url: str
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class Sending:
    """The circumstances of one send, the same for every kind."""

    delivery_id: int
    """The delivery's id (0 for a periodic re-send, which is no delivery of its own)."""
    external_url: str
    """Where sustain's API is reached from outside (links back to the alert)."""
    now: datetime
    valid_for: timedelta
    """How long a receiver that expires alerts by itself keeps a firing one not re-sent."""


class NotifierKind(ABC):
    """One kind of notifier. Subclasses set `name` and `spec` and build the request."""

    name: ClassVar[str]
    """The `kind` of its notifiers (at most MAX_KIND_CHARS characters)."""
    spec: ClassVar[type[NotifierSpec]]
    """Its configuration: a NotifierSpec whose `kind` is Literal[name], adding the fields and
    rules of this kind (the only place they are checked)."""
    resends: ClassVar[bool] = False
    """Whether every firing alert routed to it is re-sent each period (SUSTAIN_ALERTMANAGER_
    RESEND_SECONDS), for receivers that expire alerts not re-sent."""

    @abstractmethod
    def request(self, target: Target, payloads: Sequence[Mapping[str, Any]],
                sending: Sending) -> Request:
        """The request carrying `payloads`: one alert, or (when `resends`) every firing alert
        of a re-send at once."""
