"""What the status page reads, a page at a time: how many probes are in each state, one page
of probes (worst state first) with their endpoints and newest finished runs, and the alerts
that are pending or firing. Each probe's state is worked out here, in SQL, so counting and
ordering thousands of probes never loads them all."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, get_args

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.db import sample_blocks
from sustain.service.db.models import AlertRow, Probe
from sustain.service.runs.rows import STORED_COLUMNS, SampleTuple

ProbeState = Literal["down", "failing", "no data", "degraded", "waiting", "ok", "disabled"]
STATE_ORDER: tuple[ProbeState, ...] = get_args(ProbeState)
"""A probe's states, worst first (the page's order): disabled; else down or no data while a
SustainEndpointDown or SustainNoData alert on it fires; else by its newest finished run:
none yet (waiting), succeeded (ok), failed (failing), anything else (degraded)."""


@dataclass(frozen=True, slots=True)
class ProbeRow:
    id: int
    name: str
    endpoint: str
    model: str
    enabled: bool
    interval_s: int
    cron: str | None
    labels: dict[str, Any]
    state: ProbeState


@dataclass(frozen=True, slots=True)
class LatestRun:
    id: int
    status: str
    scheduled_for: datetime
    finished_at: datetime | None
    cache_hit_ratio: float | None = None
    quality: dict[str, Any] | None = None
    """The run's canaries: {checked, passed}."""
    sessions: dict[str, Any] | None = None
    """A sessions run's {conversations, completed, turns, failed_turns}."""
    queue_max: float | None = None
    """Most requests waiting at the server during the run (its metrics_url)."""
    capacity: dict[str, Any] | None = None
    """A capacity run's {unit, max_passing, ...} (points left out)."""
    efficiency: dict[str, Any] | None = None
    """The run's efficiency under its endpoint's deployment."""
    item_throughput: float | None = None
    """Inputs embedded or documents ranked per second (embeddings, rerank)."""
    rtf_p50: float | None = None
    """A transcription run's median real-time factor."""
    retrieval_hit_rate: float | None = None
    """A RAG run's share of questions whose expected passage was retrieved."""


_FINISHED = ("finished_at IS NOT NULL "
             "AND status NOT IN ('missed', 'skipped', 'cancelled', 'interrupted')")
"""A run that says something of its endpoint: finished, and not missed, skipped, cancelled or
interrupted (its service was stopped during it)."""

_STATES = f"""
WITH down AS (
    SELECT DISTINCT ON (labels ->> 'probe') labels ->> 'probe' AS probe,
           CASE alertname WHEN 'SustainEndpointDown' THEN 'down' ELSE 'no data' END AS state
    FROM alerts
    WHERE state = 'firing' AND alertname IN ('SustainEndpointDown', 'SustainNoData')
      AND labels ? 'probe'
    ORDER BY labels ->> 'probe', severity, alertname),
states AS (
    SELECT p.id, CASE WHEN NOT p.enabled THEN 'disabled'
                      WHEN d.state IS NOT NULL THEN d.state
                      WHEN r.status IS NULL THEN 'waiting'
                      WHEN r.status = 'succeeded' THEN 'ok'
                      WHEN r.status = 'failed' THEN 'failing'
                      ELSE 'degraded' END AS state
    FROM probes p
    LEFT JOIN down d ON d.probe = p.name
    LEFT JOIN LATERAL (
        SELECT status FROM runs WHERE probe_id = p.id AND {_FINISHED}
        ORDER BY scheduled_for DESC LIMIT 1) r ON true)
"""
"""Every probe's state (see STATE_ORDER): one backward index scan of its runs per probe."""


async def state_counts(session: AsyncSession) -> dict[ProbeState, int]:
    """How many probes are in each state (states with none left out)."""
    rows = await session.execute(text(_STATES + "SELECT state, count(*) FROM states "
                                                "GROUP BY state"))
    return {state: int(count) for state, count in rows.all()}


async def probe_page(session: AsyncSession, state: ProbeState | None, offset: int,
                     limit: int) -> list[ProbeRow]:
    """`limit` probes from `offset` on, worst state first, then by name (in `state` only,
    if named)."""
    rows = await session.execute(text(_STATES + """
SELECT p.id, p.name, e.name, e.model, p.enabled, p.interval_seconds, p.cron, p.labels, s.state
FROM states s JOIN probes p ON p.id = s.id JOIN endpoints e ON e.id = p.endpoint_id
WHERE CAST(:state AS text) IS NULL OR s.state = CAST(:state AS text)
ORDER BY array_position(CAST(:order AS text[]), s.state), p.name
LIMIT :limit OFFSET :offset"""), {"state": state, "order": list(STATE_ORDER),
                                  "limit": limit, "offset": offset})
    return [ProbeRow(*row) for row in rows.all()]


_LATEST = text(f"""
SELECT p.id AS probe_id, r.id, r.status, r.scheduled_for, r.finished_at,
       r.summary -> 'cache_hit_ratio' AS cache_hit_ratio, r.summary -> 'quality' AS quality,
       r.summary -> 'sessions' AS sessions,
       r.summary #> '{{server_metrics,waiting,max}}' AS queue_max,
       CASE WHEN jsonb_typeof(r.summary -> 'capacity') = 'object'
            THEN (r.summary -> 'capacity') - 'points' END AS capacity,
       r.summary -> 'efficiency' AS efficiency,
       COALESCE(r.summary -> 'items_per_second', r.summary -> 'item_throughput')
           AS item_throughput,
       COALESCE(r.summary #> '{{rtf_ratio,p50}}', r.summary #> '{{rtf,p50}}') AS rtf_p50,
       COALESCE(r.summary -> 'retrieval_hit_ratio', r.summary -> 'retrieval_hit_rate')
           AS retrieval_hit_rate
FROM probes p
CROSS JOIN LATERAL (
    SELECT id, status, scheduled_for, finished_at, summary FROM runs
    WHERE probe_id = p.id AND {_FINISHED}
    ORDER BY scheduled_for DESC LIMIT 1) r
WHERE p.id = ANY(CAST(:ids AS bigint[]))
""")


@dataclass(frozen=True, slots=True)
class LocationRun:
    """A probe's newest finished run in one of its locations."""

    location: str
    run_id: int | None
    status: str | None
    scheduled_for: datetime | None


_BY_LOCATION = text(f"""
SELECT p.id AS probe_id, l.location, r.id, r.status, r.scheduled_for
FROM probes p
CROSS JOIN LATERAL unnest(p.locations) AS l(location)
LEFT JOIN LATERAL (
    SELECT id, status, scheduled_for FROM runs
    WHERE probe_id = p.id AND location = l.location AND {_FINISHED}
    ORDER BY scheduled_for DESC LIMIT 1) r ON true
WHERE p.id = ANY(CAST(:ids AS bigint[])) AND cardinality(p.locations) > 1
ORDER BY p.id, l.location
""")


async def latest_by_location(session: AsyncSession, probe_ids: Collection[int]
                             ) -> dict[int, list[LocationRun]]:
    """For each of `probe_ids` that runs from several locations, its newest finished run in
    each (None where it has none yet): the page shows locations side by side."""
    out: dict[int, list[LocationRun]] = {}
    for r in await session.execute(_BY_LOCATION, {"ids": list(probe_ids)}):
        out.setdefault(r.probe_id, []).append(
            LocationRun(r.location, r.id, r.status, r.scheduled_for))
    return out


async def latest_runs(session: AsyncSession, probe_ids: Collection[int]
                      ) -> dict[int, LatestRun]:
    """Each of `probe_ids`' newest run that has finished (any outcome but missed, skipped or
    cancelled, which say nothing of the endpoint): one backward index scan per probe, not a
    scan of every retained run."""
    rows = await session.execute(_LATEST, {"ids": list(probe_ids)})
    return {r.probe_id: LatestRun(r.id, r.status, r.scheduled_for, r.finished_at,
                                  _number(r.cache_hit_ratio), _object(r.quality),
                                  _object(r.sessions), _number(r.queue_max),
                                  _object(r.capacity), _object(r.efficiency),
                                  _number(r.item_throughput), _number(r.rtf_p50),
                                  _number(r.retrieval_hit_rate))
            for r in rows}


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _object(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


async def first_runs_since(session: AsyncSession, since: datetime, probe_ids: Collection[int]
                           ) -> dict[int, datetime]:
    """Each of `probe_ids`' earliest run scheduled since `since` (for charts that start
    there)."""
    rows = await session.execute(text(
        "SELECT probe_id, min(scheduled_for) AS first FROM runs "
        "WHERE scheduled_for >= :since AND probe_id = ANY(CAST(:ids AS bigint[])) "
        "GROUP BY probe_id"), {"since": since, "ids": list(probe_ids)})
    return {r.probe_id: r.first for r in rows}


async def active_alerts(session: AsyncSession, limit: int) -> tuple[Sequence[AlertRow], int]:
    """The first `limit` pending or firing alerts (firing first, then by severity and name),
    and how many there are in all."""
    active = AlertRow.state.in_(("firing", "pending"))
    total = (await session.execute(select(func.count()).where(active))).scalar_one()
    rows = (await session.execute(
        select(AlertRow).where(active)
        .order_by(AlertRow.state, AlertRow.severity, AlertRow.alertname, AlertRow.fingerprint)
        .limit(limit))).scalars().all()
    return rows, int(total)


MAX_REPORT_SAMPLES = 100_000
"""Requests a run page's histograms read at most (the first ones recorded)."""


async def run_latencies(session: AsyncSession, run_id: int, started_at: datetime | None
                        ) -> tuple[list[float], list[float]]:
    """A run's successful requests' TTFT and E2E (ms), for its page's histograms: its first
    MAX_REPORT_SAMPLES, rows and packed."""
    since = None if started_at is None else started_at - timedelta(minutes=10)
    rows = await session.execute(text(
        "SELECT pos, ttft_ms, e2e_ms FROM samples WHERE run_id = :r AND outcome = 'success' "
        "AND (CAST(:since AS timestamptz) IS NULL OR sent_at >= CAST(:since AS timestamptz)) "
        "ORDER BY pos LIMIT :n"), {"r": run_id, "since": since, "n": MAX_REPORT_SAMPLES})
    found = {int(pos): (ttft, e2e) for pos, ttft, e2e in rows}
    for pos, figures in await sample_blocks.run_blocks(
            await session.connection(), run_id, None, since, None, MAX_REPORT_SAMPLES,
            _latencies):
        found.setdefault(pos, figures)
    ttfts, e2es = [], []
    for pos in sorted(found)[:MAX_REPORT_SAMPLES]:
        ttft, e2e = found[pos]
        if ttft is not None:
            ttfts.append(float(ttft))
        e2es.append(float(e2e))
    return ttfts, e2es


_OUTCOME, _TTFT, _E2E, _ERROR, _STATUS, _DETAIL = (
    STORED_COLUMNS.index(name) for name in (
        "outcome", "ttft_ms", "e2e_ms", "error_class", "http_status", "error_detail"))


def _latencies(row: SampleTuple) -> tuple[float | None, float] | None:
    return (row[_TTFT], row[_E2E]) if row[_OUTCOME] == "success" else None


def _failed(row: SampleTuple) -> bool | None:
    return None if row[_OUTCOME] == "success" else True


def _failure(row: SampleTuple) -> tuple[str | None, int | None, str | None] | None:
    return None if row[_OUTCOME] == "success" else (row[_ERROR], row[_STATUS], row[_DETAIL])


async def newest_finished_run(session: AsyncSession, probe: str | None) -> int | None:
    """The id of the newest run that finished with something to say of its endpoint (of the
    probe named, or of any), or None: a backward scan of an index, not a sort of every run."""
    if probe is None:
        query = text(f"SELECT id FROM runs WHERE {_FINISHED} ORDER BY id DESC LIMIT 1")
    else:
        query = text(f"SELECT id FROM runs WHERE probe_id = (SELECT id FROM probes WHERE "
                     f"name = :name) AND {_FINISHED} ORDER BY scheduled_for DESC LIMIT 1")
    found = (await session.execute(query, {"name": probe} if probe is not None else {})).first()
    return None if found is None else int(found[0])


@dataclass(frozen=True, slots=True)
class FirstFailure:
    """A run's first failed request, as its sample row keeps it."""

    error_class: str
    http_status: int | None
    failed: int
    """Failed requests in the run (of those stored)."""
    detail: str | None = None
    """Its error detail as stored: the server's words, credentials redacted (None for a
    sample stored before migration 0024, or a failure without words)."""


async def first_failure(session: AsyncSession, run_id: int, started_at: datetime | None
                        ) -> FirstFailure | None:
    """The first failed request of a run (in send order), and how many failed (of its rows
    and its first MAX_REPORT_SAMPLES packed samples)."""
    since = None if started_at is None else started_at - timedelta(minutes=10)
    row = (await session.execute(text(
        "SELECT pos, error_class, http_status, count(*) OVER (), error_detail FROM samples "
        "WHERE run_id = :r AND outcome <> 'success' "
        "AND (CAST(:since AS timestamptz) IS NULL OR sent_at >= CAST(:since AS timestamptz)) "
        "ORDER BY pos LIMIT 1"), {"r": run_id, "since": since})).first()
    connection = await session.connection()
    failed = 0 if row is None else int(row[3])
    first = None if row is None else (int(row[0]), (row[1], row[2], row[4]))
    packed_first = await sample_blocks.run_blocks(
        connection, run_id, None, since, None, 1, _failure)
    if packed_first:
        # rows then blocks: a sample packed in between is in both; count each once
        at_rows = {int(pos) for (pos,) in await session.execute(text(
            "SELECT pos FROM samples WHERE run_id = :r AND outcome <> 'success' "
            "AND (CAST(:since AS timestamptz) IS NULL "
            "OR sent_at >= CAST(:since AS timestamptz)) ORDER BY pos LIMIT :n"),
            {"r": run_id, "since": since, "n": MAX_REPORT_SAMPLES})}
        failed = len(at_rows | {pos for pos, _ in await sample_blocks.run_blocks(
            connection, run_id, None, since, None, MAX_REPORT_SAMPLES, _failed)})
        if first is None or packed_first[0][0] < first[0]:
            first = packed_first[0]
    if first is None:
        return None
    error, status, detail = first[1]
    return FirstFailure(str(error or "unknown"), None if status is None else int(status),
                        failed, None if detail is None else str(detail))


async def probe_names(session: AsyncSession, limit: int) -> list[str]:
    """The first `limit` probe names, alphabetically (the compare page's choices)."""
    return list(await session.scalars(select(Probe.name).order_by(Probe.name).limit(limit)))
