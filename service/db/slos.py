"""SLO rows and their counts: columns from a body, backfill after a write, status reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, exists, func, or_, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from sustain.service.db import slo_counts
from sustain.service.db.models import Probe, Slo, SloRunCount
from sustain.service.evaluation.slo_status import (
    SloStatus,
    across_locations,
    in_each_location,
    judged,
    needed_windows,
    status,
)
from sustain.service.evaluation.tiers import BurnTier
from sustain.service.schemas.slos import Sli, SloCreate, SloLocations, SloRead, SloUpdate

BACKFILL_MARGIN = timedelta(days=1)
"""Raw samples of the oldest retained day may already be partly dropped: count them from
sketches instead."""


def tiers_of(slo: Slo) -> list[BurnTier]:
    return [BurnTier.model_validate(t) for t in slo.tiers]


def lookback(slo: Slo) -> timedelta:
    """How far back counts matter: the compliance window or the longest tier window."""
    longest = max([slo.window_s, *(t.long_window_s for t in tiers_of(slo))])
    return timedelta(seconds=longest)


async def recount(session: AsyncSession, slo: Slo, sample_retention_days: int) -> int:
    """Drop the SLO's counts and count again (after a create or a change of what it
    measures): exact while raw samples are retained, approximate before."""
    await session.execute(delete(SloRunCount).where(SloRunCount.slo_id == slo.id))
    now = datetime.now(UTC)
    exact_since = now - timedelta(days=sample_retention_days) + BACKFILL_MARGIN
    connection = await session.connection()
    return await slo_counts.backfill(connection, slo.id, now - lookback(slo), exact_since)


async def any_approximate(session: AsyncSession, slo_id: int, since: datetime) -> bool:
    return bool((await session.execute(select(exists().where(
        SloRunCount.slo_id == slo_id, SloRunCount.approximate.is_(True),
        SloRunCount.scheduled_for >= since)))).scalar_one())


async def unknown_probes(session: AsyncSession, names: Sequence[str]) -> list[tuple[int, str]]:
    """The (position, name) of each name in `names` that no probe has."""
    known = set((await session.execute(select(Probe.name).where(Probe.name.in_(set(names)))))
                .scalars())
    return [(i, name) for i, name in enumerate(names) if name not in known]


RECOUNT_COLUMNS = frozenset({"probe_names", "probe_labels", "kind", "metric", "threshold_ms"})
"""A change to any of these recounts the SLO's events."""


def columns(body: SloCreate | SloUpdate, *, partial: bool = False) -> dict[str, Any]:
    """Column values of a body: every field, or (partial) only those the caller set."""
    out = body.model_dump(mode="json", exclude_unset=partial)
    if "probes" in out:
        out["probe_names"] = out.pop("probes")
    if "window" in out:
        out["window_s"] = out.pop("window")
    if "locations" in out and body.locations is not None:
        out.pop("locations")  # replaced whole: a field it leaves out takes its default
        out |= {"locations_mode": body.locations.mode,
                "min_locations": body.locations.min_locations}
    if "sli" in out:
        sli = out.pop("sli")
        out |= {"kind": sli["kind"], "metric": sli.get("metric"),
                "threshold_ms": sli.get("threshold_ms")}
    return out


def read(slo: Slo) -> SloRead:
    """What the API answers for a stored SLO."""
    return SloRead(
        id=slo.id, name=slo.name, description=slo.description, probes=list(slo.probe_names),
        probe_labels=slo.probe_labels,
        sli=Sli.model_validate({"kind": slo.kind, "metric": slo.metric,
                                "threshold_ms": slo.threshold_ms}),
        objective=slo.objective, window_s=slo.window_s, tiers=tiers_of(slo),
        locations=SloLocations(mode=slo.locations_mode,  # type: ignore[arg-type]
                               min_locations=slo.min_locations),
        managed_by=slo.managed_by, created_at=slo.created_at, updated_at=slo.updated_at)


async def judged_status(connection: AsyncConnection, slo: Slo, now: datetime
                        ) -> tuple[SloStatus, dict[str, SloStatus]]:
    """The SLO's status at `now` as it is judged (across locations, or in N of them), and its
    status in each location, from one read of its windowed counts."""
    tiers = tiers_of(slo)
    windows = needed_windows(slo.window_s, tiers)
    located = await slo_counts.location_window_counts(connection, slo.id, now, windows)
    places = in_each_location(slo.objective, slo.window_s, tiers, located)
    across = status(slo.objective, slo.window_s, tiers, across_locations(located, windows))
    return judged(across, places, slo.locations_mode, slo.min_locations, tiers), places


@dataclass(frozen=True, slots=True)
class SloSnapshot:
    """What /metrics shows of one SLO."""

    name: str
    objective: float
    status: SloStatus
    good_total: int
    """All good events counted (all retained runs): the sustain_slo_events_total counter."""
    bad_total: int


async def snapshots(session: AsyncSession, now: datetime) -> list[SloSnapshot]:
    out = []
    slos = (await session.execute(select(Slo).order_by(Slo.id))).scalars().all()
    totals = dict((slo_id, (int(g), int(t))) for slo_id, g, t in await session.execute(
        select(SloRunCount.slo_id, func.sum(SloRunCount.good), func.sum(SloRunCount.total))
        .group_by(SloRunCount.slo_id)))
    connection = await session.connection()
    for slo in slos:
        found, _ = await judged_status(connection, slo, now)
        good, total = totals.get(slo.id, (0, 0))
        out.append(SloSnapshot(slo.name, slo.objective, found, good, total - good))
    return out


async def covering(session: AsyncSession, name: str, labels: Mapping[str, Any], now: datetime,
                   limit: int = 100) -> list[tuple[Slo, SloStatus]]:
    """The SLOs that cover a probe (by its name, or by labels it carries), each with its
    judged status at `now`; at most `limit`, oldest first."""
    found = await session.scalars(
        select(Slo).where(or_(Slo.probe_names.contains([name]),
                              and_(Slo.probe_labels != text("'{}'::jsonb"),
                                   Slo.probe_labels.contained_by(dict(labels)))))
        .order_by(Slo.id).limit(limit))
    connection = await session.connection()
    return [(slo, (await judged_status(connection, slo, now))[0]) for slo in found]
