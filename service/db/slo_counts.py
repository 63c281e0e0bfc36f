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
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from sustain.probes.measure import sketch_record
from sustain.probes.measure.sketch import MetricSketch

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
