"""Writing a finished run: status, counts and summary, its sketches, and its share of the
hourly and daily rollups, in the writer's transaction right after its samples."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from probes.measure.sketch import MetricSketch, SketchMerger
from service.db.models import Rollup, RollupSketch, Run, RunSketch
from service.ingest.finals import RunFinal

ROLLUP_WIDTHS_S = (3600, 86400)
"""Hourly and daily rollups."""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def bucket_start(moment: datetime, width_s: int) -> datetime:
    """Start of the width_s-long bucket (aligned on the Unix epoch, UTC) holding `moment`."""
    seconds = (moment - EPOCH) // timedelta(seconds=1)
    return EPOCH + timedelta(seconds=seconds - seconds % width_s)


def metric_sketches(final: RunFinal) -> dict[str, MetricSketch]:
    """The whole run's sketch of each metric: its stages' sketches merged."""
    mergers: defaultdict[str, SketchMerger] = defaultdict(SketchMerger)
    for (_, metric), data in sorted(final.sketches.items()):
        mergers[metric].add(data)
    return {metric: merger.result() for metric, merger in sorted(mergers.items())}


async def apply(connection: AsyncConnection, final: RunFinal) -> bool:
    """Record `final` (inside the writer's transaction). False, and nothing written, when the
    run is already final: a retry after a commit whose answer was lost, or a run abandoned by
    another replica."""
    counts = final.counts
    values: dict[str, object] = {
        "status": final.status, "error": final.error, "summary": final.summary,
        "finished_at": func.now(), "samples_dropped": final.samples_dropped,
    }
    if counts is not None:
        values |= {"attempts": counts.attempts, "successes": counts.successes,
                   "good": counts.good, "output_tokens": counts.output_tokens,
                   "measured_s": counts.measured_s}
    updated = await connection.execute(
        update(Run).where(Run.id == final.run_id, Run.status.in_(("pending", "running")))
        .values(**values).returning(Run.id))
    if updated.scalar_one_or_none() is None:
        return False
    if final.sketches:
        await connection.execute(insert(RunSketch), [
            _sketch_values(MetricSketch.from_bytes(data), data) | {
                "run_id": final.run_id, "stage": stage, "metric": metric}
            for (stage, metric), data in sorted(final.sketches.items())
        ])
    if counts is not None:
        merged = metric_sketches(final)
        for width in ROLLUP_WIDTHS_S:
            await _add_counts(connection, final, width)
            for metric, sketch in merged.items():
                await _merge_sketch(connection, final.probe_id, width,
                                    bucket_start(final.scheduled_for, width), metric, sketch)
    return True


def _sketch_values(sketch: MetricSketch, data: bytes) -> dict[str, object]:
    return {"count": sketch.count, "sum": sketch.sum, "min": sketch.min, "max": sketch.max,
            "sketch": data}


async def _add_counts(connection: AsyncConnection, final: RunFinal, width: int) -> None:
    counts = final.counts
    assert counts is not None
    good_known = counts.good is not None
    row = {
        "probe_id": final.probe_id, "width_s": width,
        "start": bucket_start(final.scheduled_for, width), "runs": 1,
        "attempts": counts.attempts, "successes": counts.successes,
        "good": counts.good or 0, "good_measured_s": counts.measured_s if good_known else 0.0,
        "output_tokens": counts.output_tokens, "measured_s": counts.measured_s,
    }
    statement = pg_insert(Rollup).values(**row)
    summed = ("runs", "attempts", "successes", "good", "good_measured_s", "output_tokens",
              "measured_s")
    await connection.execute(statement.on_conflict_do_update(
        index_elements=["probe_id", "width_s", "start"],
        set_={name: getattr(Rollup, name) + getattr(statement.excluded, name)
              for name in summed}))


async def _merge_sketch(connection: AsyncConnection, probe_id: int, width: int,
                        start: datetime, metric: str, sketch: MetricSketch) -> None:
    """Insert the bucket's sketch, or merge into it under a row lock (replicas finishing runs
    of the same probe and hour take turns)."""
    data = sketch.to_bytes()
    key = {"probe_id": probe_id, "width_s": width, "start": start, "metric": metric}
    created = await connection.execute(
        pg_insert(RollupSketch).values(**key, **_sketch_values(sketch, data))
        .on_conflict_do_nothing().returning(RollupSketch.probe_id))
    if created.scalar_one_or_none() is not None:
        return
    current = (await connection.execute(
        select(RollupSketch.sketch).filter_by(**key).with_for_update())).scalar_one()
    merger = SketchMerger()
    merger.add(current)
    merger.add(data)
    merged = merger.result()
    merged_data = merged.to_bytes()
    await connection.execute(
        update(RollupSketch).filter_by(**key).values(**_sketch_values(merged, merged_data)))
