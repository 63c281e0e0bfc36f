"""Alert rows: moving one alert's state machine under its row lock, so that however many
replicas evaluate it, each transition is recorded, and its notification owed, exactly once."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.db.models import AlertEvent, AlertRow, Notification
from sustain.service.evaluation.alert_state import Alert, AlertState, step
from sustain.service.evaluation.candidates import Candidate


def _alert(row: AlertRow) -> Alert:
    return Alert(state=AlertState(row.state), active_since=row.active_since,
                 fired_at=row.fired_at, resolved_at=row.resolved_at,
                 last_notified_at=row.last_notified_at)


def payload(candidate: Candidate, alert: Alert, transition: str) -> dict[str, Any]:
    """What notifiers receive (Alertmanager-shaped: labels, annotations, startsAt, endsAt)."""
    return {
        "status": "resolved" if transition == "resolved" else "firing",
        "transition": transition, "labels": candidate.labels,
        "annotations": candidate.annotations, "fingerprint": candidate.fingerprint,
        "startsAt": alert.fired_at.isoformat() if alert.fired_at else None,
        "endsAt": alert.resolved_at.isoformat()
        if transition == "resolved" and alert.resolved_at else None,
    }


async def advance(session: AsyncSession, candidate: Candidate, now: datetime,
                  hold: timedelta, repeat: timedelta | None, replica: str) -> str | None:
    """Evaluate one alert (inside a transaction); the transition notified, if any."""
    key = candidate.fingerprint
    await session.execute(pg_insert(AlertRow).values(
        fingerprint=key, alertname=candidate.alertname, labels=candidate.labels,
        annotations=candidate.annotations, severity=candidate.severity,
        state=AlertState.INACTIVE.value).on_conflict_do_nothing())
    row = (await session.execute(
        select(AlertRow).where(AlertRow.fingerprint == key).with_for_update())).scalar_one()
    if row.evaluated_at is not None and row.evaluated_at >= now:
        return None  # another replica has evaluated this moment or a later one
    result = step(_alert(row), candidate.condition, now, hold, repeat)
    alert = result.alert
    row.state = alert.state.value
    row.active_since = alert.active_since
    row.fired_at = alert.fired_at
    row.resolved_at = alert.resolved_at
    row.last_notified_at = alert.last_notified_at
    row.annotations = candidate.annotations
    row.evaluated_at = now
    if result.notify is not None:
        session.add(AlertEvent(fingerprint=key, transition=result.notify, at=now,
                               replica=replica))
        session.add(Notification(fingerprint=key, transition=result.notify,
                                 payload=payload(candidate, alert, result.notify)))
    await session.flush()
    return result.notify


async def counts_by_state(session: AsyncSession) -> list[tuple[str, str, str, int]]:
    """(alertname, severity, state, count) of every alert not inactive."""
    rows = await session.execute(
        select(AlertRow.alertname, AlertRow.severity, AlertRow.state, func.count())
        .where(AlertRow.state != "inactive")
        .group_by(AlertRow.alertname, AlertRow.severity, AlertRow.state))
    return [(a, s, st, int(n)) for a, s, st, n in rows]
