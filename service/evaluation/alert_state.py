"""The alert state machine: inactive -> pending (condition true, waiting `for`) -> firing ->
resolved (and back to pending if the condition returns). Pure: the caller stores the state
and turns each transition into exactly one notification."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum


class AlertState(StrEnum):
    INACTIVE = "inactive"
    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class Alert:
    state: AlertState = AlertState.INACTIVE
    active_since: datetime | None = None
    """When the condition last became true (pending began)."""
    fired_at: datetime | None = None
    resolved_at: datetime | None = None
    last_notified_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Step:
    alert: Alert
    notify: str | None
    """"firing", "resolved" or "repeat" when a notification is due; None otherwise."""


def step(alert: Alert, condition: bool, now: datetime, hold: timedelta,
         repeat: timedelta | None) -> Step:
    """Advance one evaluation. `hold` is how long the condition must stay true before firing
    (0 fires at once); `repeat` re-notifies a firing alert that often (None: never)."""
    if condition:
        if alert.state in (AlertState.INACTIVE, AlertState.RESOLVED):
            alert = Alert(state=AlertState.PENDING, active_since=now)
        if alert.state is AlertState.PENDING:
            assert alert.active_since is not None
            if now - alert.active_since >= hold:
                fired = replace(alert, state=AlertState.FIRING, fired_at=now,
                                last_notified_at=now)
                return Step(fired, "firing")
            return Step(alert, None)
        if repeat is not None and alert.last_notified_at is not None \
                and now - alert.last_notified_at >= repeat:
            return Step(replace(alert, last_notified_at=now), "repeat")
        return Step(alert, None)
    if alert.state is AlertState.FIRING:
        return Step(replace(alert, state=AlertState.RESOLVED, resolved_at=now,
                            last_notified_at=now), "resolved")
    if alert.state is AlertState.PENDING:
        return Step(Alert(), None)
    return Step(alert, None)
