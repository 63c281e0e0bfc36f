"""Good and total SLI events of runs, per SLO that covers them.

Availability and goodput come from the run's own counts (exact at any age), and so does
quality (the run's passed over checked canaries). Latency counts
the run's successful requests whose metric is at or under the threshold, from raw samples
while they are retained (exact), and from the run's sketches once they are not (flagged
approximate; for `itl`, the sketch holds every gap rather than each request's worst gap).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from sustain.probes.measure import sketch_record
from sustain.probes.measure.sketch import MetricSketch
from sustain.service.db import sample_blocks
from sustain.service.runs import sample_block
from sustain.service.runs.rows import POS, SENT_AT, STORED_COLUMNS

COVERS = """(p.name = ANY(s.probe_names)
             OR (s.probe_labels <> '{}'::jsonb AND p.labels @> s.probe_labels))"""

LATENCY_VALUE = """CASE s.metric WHEN 'ttft' THEN x.ttft_ms WHEN 'tpot' THEN x.tpot_ms
                                  WHEN 'ttfo' THEN x.ttfo_ms
                                  WHEN 'itl' THEN x.itl_max_ms ELSE x.e2e_ms END"""

COUNT_EXACT = f"""
    INSERT INTO slo_run_counts (slo_id, run_id, scheduled_for, location, good, total)
    SELECT s.id, r.id, r.scheduled_for, r.location,
           CASE s.kind WHEN 'availability' THEN r.successes
                       WHEN 'goodput' THEN coalesce(r.good, r.successes)
                       WHEN 'quality' THEN coalesce(r.quality_passed, 0)
                       ELSE lat.good END,
           CASE s.kind WHEN 'latency' THEN lat.total
                       WHEN 'quality' THEN coalesce(r.quality_checked, 0)
                       ELSE r.attempts END
    FROM runs r
    JOIN probes p ON p.id = r.probe_id
    JOIN slos s ON {COVERS}
    LEFT JOIN LATERAL (
        SELECT count(*) FILTER (WHERE q.v <= s.threshold_ms) AS good, count(*) AS total
        FROM (SELECT {LATENCY_VALUE} AS v FROM samples x
              WHERE x.run_id = r.id AND x.outcome = 'success'
                AND x.sent_at >= r.started_at - interval '10 minutes') AS q
        WHERE q.v IS NOT NULL
    ) AS lat ON s.kind = 'latency'
    WHERE r.attempts IS NOT NULL AND __RUNS__ AND __SLOS__
      AND NOT (s.kind = 'latency' AND EXISTS (SELECT 1 FROM sample_blocks b
                                              WHERE b.run_id = r.id))
    ON CONFLICT (slo_id, run_id) DO NOTHING
"""

APPROXIMATE_SOURCES = f"""
    SELECT s.id, s.metric, s.threshold_ms, r.id, r.scheduled_for, r.sketches, r.location
    FROM runs r
    JOIN probes p ON p.id = r.probe_id
    JOIN slos s ON {COVERS}
    WHERE s.id = :slo_id AND s.kind = 'latency' AND r.attempts IS NOT NULL
      AND r.sketches IS NOT NULL
      AND r.scheduled_for >= :since AND r.scheduled_for < :exact_since
      AND NOT EXISTS (SELECT 1 FROM slo_run_counts c WHERE c.slo_id = s.id AND c.run_id = r.id)
    ORDER BY r.id
"""


PACKED_SOURCES = f"""
    SELECT s.metric, s.threshold_ms, r.id, r.scheduled_for, r.location, r.started_at
    FROM runs r
    JOIN probes p ON p.id = r.probe_id
    JOIN slos s ON {COVERS}
    WHERE s.id = :slo_id AND s.kind = 'latency' AND r.attempts IS NOT NULL
      AND r.scheduled_for >= :exact_since
      AND EXISTS (SELECT 1 FROM sample_blocks b WHERE b.run_id = r.id)
      AND NOT EXISTS (SELECT 1 FROM slo_run_counts c WHERE c.slo_id = s.id AND c.run_id = r.id)
    ORDER BY r.id
"""
"""Runs whose samples are packed (wholly or in part): counted exactly from their blocks and
rows in Python."""

LATENCY_COLUMNS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "ttfo": "ttfo_ms", "itl": "itl_max_ms"}
"""The sample column of each latency SLI metric (LATENCY_VALUE's mapping); e2e otherwise."""
_OUTCOME = STORED_COLUMNS.index("outcome")


def _count_exact(runs: str, slos: str) -> str:
    return COUNT_EXACT.replace("__RUNS__", runs).replace("__SLOS__", slos)


async def count_runs(connection: AsyncConnection, run_ids: Sequence[int]) -> None:
    """Exact counts of just-finished runs for every SLO covering them (in the writer's
    transaction, after the runs' samples)."""
    if not run_ids:
        return
    await connection.execute(
        text(_count_exact(runs="r.id = ANY(:run_ids)", slos="true")),
        {"run_ids": list(run_ids)})


async def backfill(connection: AsyncConnection, slo_id: int, since: datetime,
                   exact_since: datetime) -> int:
    """Counts of one SLO for the runs scheduled since `since` that have none: exact from
    `exact_since` on (raw samples retained), approximate before. Returns rows written."""
    result = await connection.execute(
        text(_count_exact(runs="r.scheduled_for >= :exact_since", slos="s.id = :slo_id")),
        {"exact_since": exact_since, "slo_id": slo_id})
    written = int(result.rowcount)
    rows = [(metric, threshold, run_id, scheduled_for, bytes(record), location)
            for _, metric, threshold, run_id, scheduled_for, record, location
            in await connection.execute(text(APPROXIMATE_SOURCES), {
                "slo_id": slo_id, "since": since, "exact_since": exact_since})]
    written += await _count_packed(connection, slo_id, exact_since)
    merged = await asyncio.to_thread(_approximate_counts, rows)
    if merged:
        await connection.execute(text(
            "INSERT INTO slo_run_counts (slo_id, run_id, scheduled_for, location, good, "
            "total, approximate) VALUES (:slo_id, :run_id, :at, :location, :good, :total, "
            "true) ON CONFLICT (slo_id, run_id) DO NOTHING"),
            [{"slo_id": slo_id, "run_id": run_id, "at": at, "location": location,
              "good": good, "total": total}
             for run_id, (at, location, good, total) in sorted(merged.items())])
    return written + len(merged)


async def _count_packed(connection: AsyncConnection, slo_id: int, exact_since: datetime
                        ) -> int:
    """Exact counts of the SLO for the runs since `exact_since` whose samples are packed
    (wholly or in part): each run's rows, then its blocks one at a time (decoded and counted
    in a worker thread, the rows' positions left out: one answer per sample). Returns rows
    written."""
    written = 0
    for metric, threshold, run_id, scheduled_for, location, started_at in (
            await connection.execute(text(PACKED_SOURCES),
                                     {"slo_id": slo_id, "exact_since": exact_since})).all():
        column = LATENCY_COLUMNS.get(str(metric), "e2e_ms")
        since = None if started_at is None else started_at - timedelta(minutes=10)
        values = {int(pos): float(value) for pos, value in await connection.execute(text(
            f"SELECT pos, {column} FROM samples WHERE run_id = :r AND outcome = 'success' "
            f"AND {column} IS NOT NULL AND (CAST(:since AS timestamptz) IS NULL "
            f"OR sent_at >= CAST(:since AS timestamptz))"), {"r": run_id, "since": since})}
        good = sum(1 for value in values.values() if value <= threshold)
        total = len(values)
        rows_at = frozenset(values)
        async for block in sample_blocks.each_block(connection, int(run_id), since):
            block_good, block_total = await asyncio.to_thread(
                _count_block, block, STORED_COLUMNS.index(column), float(threshold), since,
                rows_at)
            good += block_good
            total += block_total
        await connection.execute(text(
            "INSERT INTO slo_run_counts (slo_id, run_id, scheduled_for, location, good, "
            "total) VALUES (:slo_id, :run_id, :at, :location, :good, :total) "
            "ON CONFLICT (slo_id, run_id) DO NOTHING"),
            {"slo_id": slo_id, "run_id": run_id, "at": scheduled_for, "location": location,
             "good": good, "total": total})
        written += 1
    return written


def _count_block(block: tuple[int, int, bytes], index: int, threshold: float,
                 since: datetime | None, rows_at: frozenset[int]) -> tuple[int, int]:
    """(good, total) of a block's successful samples with a value in column `index`, sent
    at or after `since`, at positions not in `rows_at`. CPU: for a worker thread."""
    good = total = 0
    run_id, probe_id, data = block
    for row in sample_block.unpack(data, run_id, probe_id):
        value = row[index]
        if value is None or row[_OUTCOME] != "success" or row[POS] in rows_at or (
                since is not None and row[SENT_AT] < since):
            continue
        total += 1
        good += value <= threshold
    return good, total


def _approximate_counts(rows: Sequence[tuple[str, float, int, datetime, bytes, str]]
                        ) -> dict[int, tuple[datetime, str, int, int]]:
    """(scheduled_for, location, good, total) of each run from its record's sketches of
    the SLO's metric (every stage), runs without one left out. Decodes every record: for a
    worker thread."""
    merged: dict[int, tuple[datetime, str, int, int]] = {}
    for metric, threshold, run_id, scheduled_for, record, location in rows:
        for _, _, packed in sketch_record.unpack(record, {metric}):
            sketch = MetricSketch.load(packed)
            _, _, good, total = merged.get(run_id, (scheduled_for, location, 0, 0))
            merged[run_id] = (scheduled_for, location,
                              good + sketch.count_at_or_below(threshold), total + sketch.count)
    return merged


async def location_window_counts(connection: AsyncConnection, slo_id: int, now: datetime,
                                 windows_s: Sequence[int]
                                 ) -> dict[str, dict[int, tuple[int, int]]]:
    """(good, total) of the SLO over each trailing window ending at `now`, in each location
    that has events in the longest of them."""
    if not windows_s:
        return {}
    longest = max(windows_s)
    rows = await connection.execute(text("""
        SELECT c.location, w.s,
               coalesce(sum(c.good) FILTER (
                   WHERE c.scheduled_for >= CAST(:now AS timestamptz)
                         - make_interval(secs => w.s)), 0),
               coalesce(sum(c.total) FILTER (
                   WHERE c.scheduled_for >= CAST(:now AS timestamptz)
                         - make_interval(secs => w.s)), 0)
        FROM slo_run_counts c
        CROSS JOIN unnest(CAST(:windows AS integer[])) AS w(s)
        WHERE c.slo_id = :slo_id
          AND c.scheduled_for >= CAST(:now AS timestamptz) - make_interval(secs => :longest)
          AND c.scheduled_for < CAST(:now AS timestamptz)
        GROUP BY c.location, w.s"""),
        {"now": now, "windows": sorted(set(windows_s)), "slo_id": slo_id, "longest": longest})
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for location, window, good, total in rows:
        out.setdefault(str(location), {})[int(window)] = (int(good), int(total))
    return dict(sorted(out.items()))
