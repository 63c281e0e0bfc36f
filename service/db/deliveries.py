"""The notification outbox, drained by every replica without two of them sending the same
thing: undispatched notifications are fanned out into one delivery per matching notifier, and
due deliveries are leased (FOR UPDATE SKIP LOCKED) before they are sent. A delivery waits for
the earlier ones of its alert on the same notifier, so `resolved` never overtakes `firing`."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.db.models import AlertRow, Delivery, Notification, Notifier, Silence
from sustain.service.evaluation.matchers import Matcher, SilenceWindow


def routes_to(notifier: Notifier, labels: Mapping[str, str], transition: str) -> bool:
    """Whether a transition of an alert with these labels goes to this notifier."""
    if not notifier.enabled or (transition == "resolved" and not notifier.send_resolved):
        return False
    return all(labels.get(k) == v for k, v in notifier.match.items())


DISPATCH_LOCK_KEY = 0x5375_7374_0004


async def dispatch(session: AsyncSession, limit: int = 200) -> int:
    """Fan out up to `limit` undispatched notifications (inside a transaction); how many.
    One replica dispatches at a time (an advisory lock; the others skip), in notification
    order, so the deliveries of an alert's transitions are numbered in the order they
    happened."""
    locked = (await session.execute(text("SELECT pg_try_advisory_xact_lock(:key)"),
                                    {"key": DISPATCH_LOCK_KEY})).scalar()
    if not locked:
        return 0
    pending = (await session.execute(
        select(Notification).where(Notification.dispatched_at.is_(None))
        .order_by(Notification.id).limit(limit).with_for_update(skip_locked=True)
    )).scalars().all()
    if not pending:
        return 0
    notifiers = (await session.execute(
        select(Notifier).where(Notifier.enabled).order_by(Notifier.id))).scalars().all()
    for note in pending:
        labels = note.payload.get("labels", {})
        for notifier in notifiers:
            if routes_to(notifier, labels, note.transition):
                session.add(Delivery(notification_id=note.id, notifier_id=notifier.id,
                                     fingerprint=note.fingerprint,
                                     transition=note.transition))
        note.dispatched_at = func.now()
    await session.flush()
    return len(pending)


@dataclass(frozen=True, slots=True)
class Claimed:
    """A delivery leased to this replica, with what sending it needs."""

    id: int
    attempts: int
    transition: str
    fingerprint: str
    payload: dict[str, Any]
    notifier: Notifier
    earlier_delivered: bool
    """Whether the alert's latest `firing` reached this notifier (a `resolved` for a
    `firing` the notifier never got is skipped)."""


_CLAIM = text("""
WITH ready AS (
    SELECT d.id, d.leased_until,
           row_number() OVER (PARTITION BY d.notifier_id
                              ORDER BY (d.leased_until > now()) DESC NULLS LAST, d.id) AS rank
    FROM deliveries d JOIN notifiers n ON n.id = d.notifier_id AND n.enabled
    WHERE d.state = 'pending' AND d.next_attempt_at <= now()
      AND NOT EXISTS (
          SELECT 1 FROM deliveries e
          WHERE e.notifier_id = d.notifier_id AND e.fingerprint = d.fingerprint
            AND e.state = 'pending' AND e.id < d.id)
), picked AS (
    SELECT d.id FROM deliveries d JOIN ready r ON r.id = d.id
    WHERE r.rank <= :per_notifier AND d.state = 'pending' AND d.next_attempt_at <= now()
      AND (d.leased_until IS NULL OR d.leased_until < now())
    ORDER BY d.id LIMIT :limit
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE deliveries d
SET leased_until = now() + make_interval(secs => :lease_s), leased_by = :replica,
    attempts = d.attempts + 1
FROM picked WHERE d.id = picked.id
RETURNING d.id, d.notifier_id, d.notification_id, d.transition, d.fingerprint, d.attempts,
    coalesce((SELECT p.state = 'delivered' FROM deliveries p
              WHERE p.notifier_id = d.notifier_id AND p.fingerprint = d.fingerprint
                AND p.id < d.id AND p.transition = 'firing'
              ORDER BY p.id DESC LIMIT 1), false) AS earlier_delivered
""")


async def claim(session: AsyncSession, replica: str, lease_s: float, limit: int,
                per_notifier: int) -> list[Claimed]:
    """Lease up to `limit` deliveries due by the database's clock, of enabled notifiers, with
    at most `per_notifier` leased per notifier at a time (counting leases still held), so a
    backlog at a dead notifier cannot crowd out the others."""
    if limit <= 0:
        return []
    rows = (await session.execute(_CLAIM, {
        "lease_s": lease_s, "replica": replica, "limit": limit,
        "per_notifier": per_notifier})).all()
    if not rows:
        return []
    notifiers = {n.id: n for n in (await session.execute(
        select(Notifier).where(Notifier.id.in_({r.notifier_id for r in rows})))).scalars()}
    payloads: dict[int, dict[str, Any]] = dict((await session.execute(
        select(Notification.id, Notification.payload)
        .where(Notification.id.in_({r.notification_id for r in rows})))).all())
    return [Claimed(r.id, r.attempts, r.transition, r.fingerprint,
                    payloads[r.notification_id], notifiers[r.notifier_id],
                    r.earlier_delivered)
            for r in sorted(rows, key=lambda r: r.id)]


async def finish(session: AsyncSession, delivery_id: int, replica: str, attempt: int,
                 state: str, status: int | None = None, error: str | None = None,
                 retry_in_s: float | None = None) -> bool:
    """Record attempt number `attempt`'s outcome, if its lease is still this replica's (not
    taken over after expiring). `state` pending with `retry_in_s` schedules the next attempt
    (by the database's clock, as the claim reads it)."""
    done = state != "pending"
    retry = {} if retry_in_s is None else {
        "next_attempt_at": func.now() + func.make_interval(0, 0, 0, 0, 0, 0, retry_in_s)}
    result = await session.execute(
        update(Delivery)
        .where(Delivery.id == delivery_id, Delivery.leased_by == replica,
               Delivery.attempts == attempt, Delivery.state == "pending")
        .values(state=state, last_status=status, last_error=error, leased_until=None,
                finished_at=func.now() if done else None, **retry))
    return bool(getattr(result, "rowcount", 0))


def active_silences_query(now: datetime, limit: int
                          ) -> Select[tuple[list[dict[str, Any]], datetime, datetime]]:
    """The newest `limit` silences active at `now`, and only what matching needs of them:
    expired ones (kept as a record, never deleted) and pending ones are not read (ends_at
    is indexed)."""
    return select(Silence.matchers, Silence.starts_at, Silence.ends_at).where(
        Silence.starts_at <= now, Silence.ends_at > now).order_by(
        Silence.id.desc()).limit(limit)


async def active_silences(session: AsyncSession, now: datetime, limit: int
                          ) -> list[SilenceWindow]:
    """The silences active at `now`, as windows to match alerts against, one per row read:
    at most `limit` + 1 of them (SUSTAIN_MAX_SILENCES + 1), so a caller can tell when more
    are active than the limit allows (stored before it was lowered)."""
    rows = (await session.execute(active_silences_query(now, limit + 1))).all()
    return [SilenceWindow(tuple(Matcher(**m) for m in matchers), starts, ends)
            for matchers, starts, ends in rows]


async def resend_due(session: AsyncSession, notifier_id: int, now: datetime,
                     period: timedelta) -> bool:
    """Take this period's re-send of a re-sending notifier (one replica wins)."""
    won = await session.execute(
        update(Notifier).where(
            Notifier.id == notifier_id,
            (Notifier.resent_at.is_(None)) | (Notifier.resent_at <= now - period))
        .values(resent_at=now).returning(Notifier.id))
    return won.first() is not None


async def firing_payloads(session: AsyncSession) -> list[dict[str, Any]]:
    """Every firing alert as a notification payload (for re-sends, as Alertmanager wants)."""
    rows = (await session.execute(
        select(AlertRow).where(AlertRow.state == "firing").order_by(AlertRow.fingerprint)
    )).scalars().all()
    return [{"status": "firing", "transition": "firing", "labels": dict(r.labels),
             "annotations": dict(r.annotations), "fingerprint": r.fingerprint,
             "startsAt": r.fired_at.isoformat() if r.fired_at else None, "endsAt": None}
            for r in rows]


async def firing_fingerprints(session: AsyncSession) -> set[str]:
    return set((await session.execute(
        select(AlertRow.fingerprint).where(AlertRow.state == "firing"))).scalars())


async def resenders(session: AsyncSession, kinds: Collection[str]) -> Sequence[Notifier]:
    """The enabled notifiers of `kinds` (those whose firing alerts are re-sent)."""
    if not kinds:
        return []
    return (await session.execute(select(Notifier).where(
        Notifier.enabled, Notifier.kind.in_(list(kinds))))).scalars().all()


async def log(session: AsyncSession, notifier_id: int | None, state: str | None,
              before_id: int | None, limit: int) -> Sequence[Delivery]:
    """The delivery log, newest first."""
    query = select(Delivery).order_by(Delivery.id.desc()).limit(limit)
    if notifier_id is not None:
        query = query.where(Delivery.notifier_id == notifier_id)
    if state is not None:
        query = query.where(Delivery.state == state)
    if before_id is not None:
        query = query.where(Delivery.id < before_id)
    return (await session.execute(query)).scalars().all()
