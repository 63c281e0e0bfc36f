"""Probes side by side over one window: for each, its window figures (summaries.py), capacity
under SLO (newest and over the window), the newest run's efficiency and Pareto curve, and its
drift verdicts."""

from __future__ import annotations

import statistics
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.measure.run_sketches import reasoning_share
from sustain.service.db import drift as drift_queries
from sustain.service.db import runs as run_queries
from sustain.service.db.models import Endpoint, Probe, Run
from sustain.service.db.summaries import window_summary
from sustain.service.errors import FieldError
from sustain.service.runs import summary_record as summaries
from sustain.service.schemas.compare import (
    CapacityFigures,
    Comparison,
    DriftVerdict,
    Percentiles,
    ProbeFigures,
)
from sustain.service.schemas.history import MetricSummary

MAX_PROBES = 8
HTTP_PHASES = ("dns", "connect", "tls", "ttfb")
"""The sketched HTTP phases a comparison row gives (ProbeFigures.dns_ms, ...)."""


async def compare(session: AsyncSession, names: list[str], start: datetime,
                  end: datetime, *, location: str | None = None,
                  by_location: bool = False) -> Comparison:
    """The named probes side by side over [start, end): one row per probe, of one
    `location`'s runs or of all locations together; with `by_location`, one row per probe
    and location (those it lists, and those that ran it in the window). FieldError
    (`query.probe`) for an unknown name, a repeated one, or more than MAX_PROBES."""
    if not 1 <= len(names) <= MAX_PROBES:
        raise FieldError("query.probe", f"name 1 to {MAX_PROBES} probes")
    if len(set(names)) != len(names):
        raise FieldError("query.probe", "a probe is named twice")
    rows = (await session.execute(
        select(Probe.id, Probe.name, Endpoint.name, Endpoint.model, Probe.locations)
        .join(Endpoint, Endpoint.id == Probe.endpoint_id).where(Probe.name.in_(names)))).all()
    found = {row[1]: row for row in rows}
    missing = [name for name in names if name not in found]
    if missing:
        raise FieldError("query.probe", f"no probe named {missing[0]!r}")
    verdicts: dict[str, list[DriftVerdict]] = {}
    for name, finding in await drift_queries.findings(session):
        verdicts.setdefault(name, []).append(DriftVerdict(
            metric=finding.metric, stat=finding.stat, verdict=finding.verdict,
            ratio=finding.ratio))
    out = []
    for name in names:
        probe_id, _, endpoint, model, listed = found[name]
        places: list[str | None] = [location]
        if by_location:
            places = list(await _locations(session, probe_id, listed, start, end))
        for place in places:
            out.append(await _figures(session, name, probe_id, endpoint, model, start, end,
                                      place, verdicts.get(name, [])))
    return Comparison(from_=start, to=end, probes=out)


async def _locations(session: AsyncSession, probe_id: int, listed: list[str],
                     start: datetime, end: datetime) -> list[str]:
    """The locations a probe lists now, and those its runs in [start, end) came from."""
    ran = await session.scalars(
        select(Run.location).distinct().where(Run.probe_id == probe_id,
                                              Run.scheduled_for >= start,
                                              Run.scheduled_for < end))
    return sorted({*listed, *ran})


async def _figures(session: AsyncSession, name: str, probe_id: int, endpoint: str, model: str,
                   start: datetime, end: datetime, location: str | None,
                   drift: list[DriftVerdict]) -> ProbeFigures:
    """One probe's row: its runs in one location, or (None) in all."""
    window = await window_summary(session, probe_id, start, end, location)
    newest = await _newest_summary(session, probe_id, end, location)
    return ProbeFigures(
        probe=name, probe_id=probe_id, location=location, endpoint=endpoint, model=model,
        runs=window.runs,
        availability=window.availability, ttft_ms=_pct(window.metrics["ttft"]),
        tpot_ms=_pct(window.metrics["tpot"]), e2e_ms=_pct(window.metrics["e2e"]),
        requests_per_second=window.requests_per_second,
        output_tokens_per_second=window.output_tokens_per_second, goodput=window.goodput,
        items_per_second=window.items_per_second,
        rtf_ratio=_pct(window.metrics["rtf"]) if window.metrics["rtf"].count else None,
        retrieval_hit_ratio=window.retrieval_hit_ratio,
        ttfo_ms=_pct(window.metrics["ttfo"]) if window.metrics["ttfo"].count else None,
        reasoning_share=reasoning_share(window.metrics["reasoning_share"].mean),
        **{f"{phase}_ms": _pct(window.metrics[phase]) for phase in HTTP_PHASES
           if window.metrics[phase].count},
        capacity=await _capacity(session, probe_id, start, end, newest, location),
        efficiency=newest.get("efficiency") if newest else None,
        stability=window.stability, drift=drift,
        pareto=newest.get("pareto") if newest else None)


def _pct(summary: MetricSummary) -> Percentiles:
    return Percentiles(p50=summary.p50, p99=summary.p99)


async def _newest_summary(session: AsyncSession, probe_id: int, end: datetime,
                          location: str | None) -> dict[str, object] | None:
    found = (await session.execute(
        select(Run.summary_json, Run.summary_record).where(
            Run.probe_id == probe_id, Run.scheduled_for < end,
            *([] if location is None else [Run.location == location]),
            Run.status.in_(("succeeded", "failed")), Run.summary_json.is_not(None))
        .order_by(Run.scheduled_for.desc()).limit(1))).first()
    summary = None if found is None else summaries.whole(found[0], found[1])
    return summary if isinstance(summary, dict) else None


async def _capacity(session: AsyncSession, probe_id: int, start: datetime, end: datetime,
                    newest: dict[str, object] | None, location: str | None
                    ) -> CapacityFigures | None:
    points = await run_queries.capacity_series(session, probe_id, start, end, 10_000,
                                               location)
    if not points:
        return None
    levels = [level or 0 for _, _, level, _, _ in points]
    found = newest.get("capacity") if newest else None
    unit = found.get("unit") if isinstance(found, dict) else None
    return CapacityFigures(unit=unit if isinstance(unit, str) else None,
                           latest=levels[-1], latest_system_tps=points[-1][3],
                           runs=len(levels), minimum=min(levels),
                           median=float(statistics.median(levels)), maximum=max(levels))
