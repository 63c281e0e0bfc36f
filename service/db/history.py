"""Reads behind windowed statistics: rollup buckets, and runs with their sketches, of one
probe over a time range. Times in and out are epoch seconds."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from service.db.models import Rollup, RollupSketch, Run, RunSketch
from service.history.aggregate import Aggregate, Counts, Piece, SketchPiece, assemble, plan
from service.history.windows import DAY_S, HOUR_S, at


def _epoch(column: Any) -> Any:
    return func.extract("epoch", column)


async def rollups(session: AsyncSession, probe_id: int, width_s: int,
                  starts: Collection[int]) -> list[Piece]:
    if not starts:
        return []
    query = (select(_epoch(Rollup.start), Rollup.runs, Rollup.attempts, Rollup.successes,
                    Rollup.good, Rollup.good_measured_s, Rollup.output_tokens,
                    Rollup.measured_s)
             .where(Rollup.probe_id == probe_id, Rollup.width_s == width_s,
                    Rollup.start >= at(min(starts)), Rollup.start <= at(max(starts))))
    return [Piece(float(row[0]), Counts(*row[1:])) for row in await session.execute(query)]


async def rollup_sketches(session: AsyncSession, probe_id: int, width_s: int,
                          starts: Collection[int], metrics: Sequence[str]) -> list[SketchPiece]:
    if not starts or not metrics:
        return []
    query = (select(_epoch(RollupSketch.start), RollupSketch.metric, RollupSketch.sketch)
             .where(RollupSketch.probe_id == probe_id, RollupSketch.metric.in_(metrics),
                    RollupSketch.width_s == width_s,
                    RollupSketch.start >= at(min(starts)),
                    RollupSketch.start <= at(max(starts))))
    return [SketchPiece(float(t), m, bytes(s)) for t, m, s in await session.execute(query)]


async def runs(session: AsyncSession, probe_id: int, start: datetime, end: datetime
               ) -> list[Piece]:
    """Runs with counts (finished, with results) scheduled in [start, end)."""
    query = (select(_epoch(Run.scheduled_for), Run.attempts, Run.successes, Run.good,
                    Run.output_tokens, Run.measured_s)
             .where(Run.probe_id == probe_id, Run.scheduled_for >= start,
                    Run.scheduled_for < end, Run.attempts.is_not(None)))
    pieces = []
    for t, attempts, successes, good, tokens, measured in await session.execute(query):
        known = good is not None
        pieces.append(Piece(float(t), Counts(
            runs=1, attempts=attempts, successes=successes or 0, good=good or 0,
            good_measured_s=(measured or 0.0) if known else 0.0, output_tokens=tokens or 0,
            measured_s=measured or 0.0)))
    return pieces


async def run_sketches(session: AsyncSession, probe_id: int, start: datetime, end: datetime,
                       metrics: Sequence[str]) -> list[SketchPiece]:
    if not metrics:
        return []
    query = (select(_epoch(Run.scheduled_for), RunSketch.metric, RunSketch.sketch)
             .join(Run, Run.id == RunSketch.run_id)
             .where(Run.probe_id == probe_id, Run.scheduled_for >= start,
                    Run.scheduled_for < end, Run.attempts.is_not(None),
                    RunSketch.metric.in_(metrics)))
    return [SketchPiece(float(t), m, bytes(s)) for t, m, s in await session.execute(query)]


async def aggregates(session: AsyncSession, probe_id: int,
                     windows: Sequence[tuple[float, float]], metrics: Sequence[str]
                     ) -> list[Aggregate]:
    """One Aggregate per [a, b) window (epoch seconds), from the fewest stored pieces."""
    p = plan(windows)
    if not p.windows:
        return []
    days, hours = p.days, p.hours
    run_pieces: list[Piece] = []
    run_sketch_pieces: list[SketchPiece] = []
    if p.needs_runs:
        ranges = [r for c in p.covers for r in c.runs]
        start, end = at(min(a for a, _ in ranges)), at(max(b for _, b in ranges))
        run_pieces = await runs(session, probe_id, start, end)
        run_sketch_pieces = await run_sketches(session, probe_id, start, end, metrics)
    return assemble(
        p,
        await rollups(session, probe_id, DAY_S, days),
        await rollups(session, probe_id, HOUR_S, hours),
        run_pieces,
        await rollup_sketches(session, probe_id, DAY_S, days, metrics),
        await rollup_sketches(session, probe_id, HOUR_S, hours, metrics),
        run_sketch_pieces,
    )
