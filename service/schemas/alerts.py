"""Alerts and their history."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


class AlertRead(BaseModel):
    fingerprint: str
    alertname: str
    labels: dict[str, str]
    annotations: dict[str, str]
    severity: str
    state: str
    active_since: datetime | None
    fired_at: datetime | None
    resolved_at: datetime | None
    last_notified_at: datetime | None


class AlertEventRead(BaseModel):
    fingerprint: str
    transition: str
    at: datetime
    replica: str | None
