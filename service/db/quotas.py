"""The operator's ceilings on what the database holds, checked where objects are written: how
many endpoints, probes, SLOs and notifiers (SUSTAIN_MAX_ENDPOINTS, _PROBES, _SLOS,
_NOTIFIERS), how many silences are not yet expired (SUSTAIN_MAX_SILENCES), and the request
rate all enabled probes together plan (SUSTAIN_MAX_TOTAL_RATE).

Each check takes a transaction-scoped advisory lock for what it counts before counting, so
concurrent creates on any replica take turns and cannot overshoot; the lock is held until the
writer commits. Locks are always taken in the order of LOCK_ORDER (the config sync takes them
all), so two writers never wait on each other in a cycle.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.load.profiles import LoadProfile, parse_profile
from sustain.service.db.models import Endpoint, NamedResource, Notifier, Probe, Silence, Slo
from sustain.service.errors import ConflictError
from sustain.service.policy.limits import ObjectKind, too_many, total_rate, total_rate_problem

Counted = ObjectKind | Literal["rate"]

LOCK_NAMESPACE = 1937012084
"""Advisory lock namespace of these checks ('sust' + 1; run claims use 'sust')."""
LOCK_ORDER: tuple[Counted, ...] = ("endpoint", "probe", "slo", "notifier", "rate", "silence")
"""A lock's key is its place here: new kinds go last, so replicas of the previous release
still take the same lock for each kind they know."""
MODELS: dict[ObjectKind, type[NamedResource]] = {
    "endpoint": Endpoint, "probe": Probe, "slo": Slo, "notifier": Notifier}
"""The kinds a config file declares (silences are made over REST only)."""

LOCK = text("SELECT pg_advisory_xact_lock(:namespace, :key)")


async def lock(session: AsyncSession, *what: Counted) -> None:
    """Take the locks of `what`, in LOCK_ORDER, until the transaction ends."""
    for key, counted in enumerate(LOCK_ORDER):
        if counted in what:
            await session.execute(LOCK, {"namespace": LOCK_NAMESPACE, "key": key})


async def count(session: AsyncSession, kind: ObjectKind) -> int:
    model = MODELS[kind]
    return int((await session.execute(select(func.count()).select_from(model))).scalar_one())


async def make_room(session: AsyncSession, kind: ObjectKind, limit: int) -> None:
    """Before creating one object of `kind`: lock its count, and ConflictError (409) naming
    the setting when `limit` are already stored."""
    await lock(session, kind)
    if (problem := too_many(kind, await count(session, kind) + 1, limit)) is not None:
        raise ConflictError(problem)


async def make_room_for_silence(session: AsyncSession, now: datetime, limit: int) -> None:
    """Before creating a silence: lock the silence count, and ConflictError (409) naming
    SUSTAIN_MAX_SILENCES when `limit` silences are already pending or active at `now`.
    Expired ones are a record that no delivery loads, so they do not count: expiring one
    (DELETE) makes room. That record is bounded too: only the `limit` expired most recently
    are kept (older ones are deleted here), so creating and expiring silences in a loop
    cannot grow the table without end."""
    await lock(session, "silence")
    await session.execute(text(
        "DELETE FROM silences WHERE id IN (SELECT id FROM silences WHERE ends_at <= :now "
        "ORDER BY ends_at DESC, id DESC OFFSET :keep)"), {"now": now, "keep": limit})
    unexpired = int((await session.execute(select(func.count()).select_from(Silence).where(
        Silence.ends_at > now))).scalar_one())
    if (problem := too_many("silence", unexpired + 1, limit)) is not None:
        raise ConflictError(f"{problem} pending or active; expire one to make room")


async def enabled_profiles(session: AsyncSession, *, without: int | None = None
                           ) -> list[LoadProfile]:
    """The profiles of every enabled probe (but probe `without`), each once per location it
    runs from (each location runs it)."""
    query = select(Probe.profile, func.cardinality(Probe.locations)).where(
        Probe.enabled.is_(True))
    if without is not None:
        query = query.where(Probe.id != without)
    return [profile for p, n in (await session.execute(query)).all()
            for profile in [parse_profile(p)] * int(n)]


async def stored_total_rate(session: AsyncSession, max_rate: float) -> float:
    """The requests/s every enabled probe may send at once (see limits.total_rate)."""
    return total_rate(await enabled_profiles(session), max_rate)


async def check_total_rate(session: AsyncSession, probe_id: int | None, before: float,
                           after: LoadProfile | None, max_rate: float,
                           max_total_rate: float, locations: int = 1) -> None:
    """Before enabling probe `probe_id` (None: a new one) with profile `after` (None: it ends
    up disabled), or changing its profile: lock the total and ConflictError (409) naming
    SUSTAIN_MAX_TOTAL_RATE when the enabled probes would then plan more than
    `max_total_rate`. `before` is what the probe counted for until now (0 when disabled or
    new): a change that does not raise the total is always allowed, so probes stored before
    the limit was lowered can still be slowed down or disabled. The probe runs from
    `locations` locations, each planning `after`."""
    if after is None:
        return
    added = total_rate([after], max_rate) * locations
    if added <= before:
        return
    await lock(session, "rate")
    others = total_rate(await enabled_profiles(session, without=probe_id), max_rate)
    if (problem := total_rate_problem(others + added, max_total_rate)) is not None:
        raise ConflictError(problem)
