"""Reads behind windowed statistics: rollup buckets, and runs with their sketches, of one
probe over a time range, in one location or all of them together (`location` None). Times in
and out are epoch seconds."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import and_, func, or_, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.measure import sketch_record
from sustain.service.db.models import Rollup, RollupSketch, Run
from sustain.service.history.aggregate import (
    Aggregate,
    Counts,
    Piece,
    Plan,
    SketchPiece,
    assemble,
    plan,
)
from sustain.service.history.windows import DAY_S, HOUR_S, at


def _epoch(column: Any) -> Any:
    return func.extract("epoch", column)


def _located(column: Any, location: str | None) -> Any:
    """A filter on a location column: that location's rows, or every row (None)."""
    return column == location if location is not None else true()


async def rollups(session: AsyncSession, probe_id: int, width_s: int,
                  starts: Collection[int], location: str | None = None) -> list[Piece]:
    if not starts:
        return []
    query = (select(_epoch(Rollup.start), Rollup.runs, Rollup.attempts, Rollup.successes,
                    Rollup.good, Rollup.good_measured_s, Rollup.output_tokens,
                    Rollup.measured_s)
             .where(Rollup.probe_id == probe_id, Rollup.width_s == width_s,
                    _located(Rollup.location, location),
                    Rollup.start >= at(min(starts)), Rollup.start <= at(max(starts))))
    return [Piece(float(row[0]), Counts(*row[1:])) for row in await session.execute(query)]


async def rollup_sketches(session: AsyncSession, probe_id: int, width_s: int,
                          starts: Collection[int], metrics: Sequence[str],
                          location: str | None = None) -> list[SketchPiece]:
    if not starts or not metrics:
        return []
    query = (select(_epoch(RollupSketch.start), RollupSketch.metric, RollupSketch.sketch)
             .where(RollupSketch.probe_id == probe_id, RollupSketch.metric.in_(metrics),
                    RollupSketch.width_s == width_s,
                    _located(RollupSketch.location, location),
                    RollupSketch.start >= at(min(starts)),
                    RollupSketch.start <= at(max(starts))))
    return [SketchPiece(float(t), m, bytes(s)) for t, m, s in await session.execute(query)]


MAX_RANGES = 32
"""Past this many separate run ranges, one query over their whole span is cheaper."""


def merge_ranges(ranges: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """[a, b) ranges (epoch seconds) sorted, with touching or overlapping ones joined; past
    MAX_RANGES, the one range spanning them all."""
    merged: list[tuple[float, float]] = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    if len(merged) > MAX_RANGES:
        return [(merged[0][0], merged[-1][1])]
    return merged


def _in_ranges(ranges: Sequence[tuple[float, float]]) -> Any:
    return or_(*(and_(Run.scheduled_for >= at(a), Run.scheduled_for < at(b))
                 for a, b in ranges))


async def runs(session: AsyncSession, probe_id: int, ranges: Sequence[tuple[float, float]],
               location: str | None = None) -> list[Piece]:
    """Runs with counts (finished, with results) scheduled in any of the [a, b) ranges."""
    query = (select(_epoch(Run.scheduled_for), Run.attempts, Run.successes, Run.good,
                    Run.output_tokens, Run.measured_s)
             .where(Run.probe_id == probe_id, _in_ranges(ranges),
                    _located(Run.location, location), Run.attempts.is_not(None)))
    pieces = []
    for t, attempts, successes, good, tokens, measured in await session.execute(query):
        known = good is not None
        pieces.append(Piece(float(t), Counts(
            runs=1, attempts=attempts, successes=successes or 0, good=good or 0,
            good_measured_s=(measured or 0.0) if known else 0.0, output_tokens=tokens or 0,
            measured_s=measured or 0.0)))
    return pieces


async def run_records(session: AsyncSession, probe_id: int,
                      ranges: Sequence[tuple[float, float]], metrics: Sequence[str],
                      location: str | None = None) -> list[tuple[float, bytes]]:
    """(scheduled_for epoch s, sketch record) of the finished runs in `ranges` that measured
    something; none when no metric is asked for. Decoded by `run_pieces`, off the loop."""
    if not metrics:
        return []
    query = (select(_epoch(Run.scheduled_for), Run.sketches)
             .where(Run.probe_id == probe_id, _in_ranges(ranges), Run.attempts.is_not(None),
                    _located(Run.location, location), Run.sketches.is_not(None)))
    return [(float(t), bytes(record)) for t, record in await session.execute(query)
            if record is not None]


def run_pieces(records: Sequence[tuple[float, bytes]], metrics: Collection[str]
               ) -> list[SketchPiece]:
    """A SketchPiece per stage of each wanted metric in the records (CPU: for a thread)."""
    wanted = set(metrics)
    return [SketchPiece(t, metric, packed) for t, record in records
            for _, metric, packed in sketch_record.unpack(record, wanted)]


def _assemble(p: Plan, days: list[Piece], hours: list[Piece], runs_: list[Piece],
              day_sketches: list[SketchPiece], hour_sketches: list[SketchPiece],
              records: list[tuple[float, bytes]], metrics: Collection[str]
              ) -> list[Aggregate]:
    """`assemble` with the run records decoded first: every sketch is decoded and merged
    here, in a worker thread, never on the event loop."""
    return assemble(p, days, hours, runs_, day_sketches, hour_sketches,
                    run_pieces(records, metrics))


async def aggregates(session: AsyncSession, probe_id: int,
                     windows: Sequence[tuple[float, float]], metrics: Sequence[str],
                     location: str | None = None) -> list[Aggregate]:
    """One Aggregate per [a, b) window (epoch seconds), from the fewest stored pieces, of
    one location's runs or (None) of all of them."""
    p = plan(windows)
    if not p.windows:
        return []
    days, hours = p.days, p.hours
    counted: list[Piece] = []
    records: list[tuple[float, bytes]] = []
    if p.needs_runs:
        ranges = merge_ranges([r for c in p.covers for r in c.runs])
        counted = await runs(session, probe_id, ranges, location)
        records = await run_records(session, probe_id, ranges, metrics, location)
    return await asyncio.to_thread(
        _assemble,
        p,
        await rollups(session, probe_id, DAY_S, days, location),
        await rollups(session, probe_id, HOUR_S, hours, location),
        counted,
        await rollup_sketches(session, probe_id, DAY_S, days, metrics, location),
        await rollup_sketches(session, probe_id, HOUR_S, hours, metrics, location),
        records,
        metrics,
    )
