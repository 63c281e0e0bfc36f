"""drift_report on real Postgres, with runs and their stage sketches stored as the write path
stores them: the query reads only the probe's finished runs of the window ([start, end)) and
the metric asked for, a pinned run is read by id, the change point is the stored run where
the new level began, and the statistics run in a worker thread, never on the event loop."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.measure import sketch_record
from sustain.probes.measure.sketch import MetricSketch
from sustain.service.db import drift as drift_queries
from sustain.service.db.drift import drift_report
from sustain.service.db.engine import create_engine, session_factory
from sustain.service.db.models import Endpoint, Probe, Run
from sustain.service.evaluation.drift_runs import RunComparison, SketchRow, compare_runs

END = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
WINDOW = timedelta(hours=12)
BASELINE = timedelta(hours=36)


@pytest.fixture
async def session(database_url: str) -> AsyncIterator[AsyncSession]:
    engine = create_engine(database_url, pool_size=2)
    try:
        async with session_factory(engine)() as session:
            yield session
    finally:
        await engine.dispose()


async def create_probe(session: AsyncSession, name: str = "p1") -> int:
    endpoint = Endpoint(name=f"e-{name}", base_url="http://127.0.0.1:9/v1",
                        api_kind="openai-chat", model="m", timeout_connect_s=1.0,
                        timeout_first_token_s=1.0, timeout_total_s=1.0, tls_verify=True)
    session.add(endpoint)
    await session.flush()
    probe = Probe(name=name, endpoint_id=endpoint.id, workload={},
                  profile={"kind": "single"}, interval_seconds=3600, enabled=False)
    session.add(probe)
    await session.flush()
    return probe.id


async def create_run(session: AsyncSession, probe_id: int, scheduled_for: datetime,
                     levels_ms: Sequence[float], rng: np.random.Generator, *,
                     finished: bool = True, metric: str = "ttft", n: int = 200) -> int:
    """A scheduled run with one stage per level: n lognormal `metric` values around the
    level (5 % spread), stored as that stage's sketch. Unfinished: still running, no
    attempts."""
    record = sketch_record.pack({
        (stage, metric): MetricSketch.of(list(level * rng.lognormal(0, 0.05, n)))
        for stage, level in enumerate(levels_ms)})
    run = Run(probe_id=probe_id, trigger="schedule", scheduled_for=scheduled_for,
              status="succeeded" if finished else "running", started_at=scheduled_for,
              finished_at=scheduled_for + timedelta(minutes=1) if finished else None,
              attempts=n * len(levels_ms) if finished else None,
              successes=n * len(levels_ms) if finished else None, sketches=record)
    session.add(run)
    await session.flush()
    return run.id


async def hourly(session: AsyncSession, probe_id: int, hours: int, step_at: int,
                 step: float) -> list[int]:
    """Hourly runs ending at END, two stages of 100 ms each; from run index `step_at` on,
    `step` times slower. Their ids, oldest first."""
    rng = np.random.default_rng(5)
    ids = []
    for i in range(hours):
        level = 100.0 * (step if i >= step_at else 1.0)
        at = END - timedelta(hours=hours - i) + timedelta(minutes=10)
        ids.append(await create_run(session, probe_id, at, [level, level], rng))
    await session.commit()
    return ids


async def test_the_change_point_is_the_stored_run_where_the_new_level_began(
        session: AsyncSession) -> None:
    probe_id = await create_probe(session)
    run_ids = await hourly(session, probe_id, 48, step_at=40, step=1.3)
    result = await drift_report(session, probe_id, "ttft", "p99", end=END, window=WINDOW,
                                baseline=BASELINE)
    assert result.report.verdict == "regressed"
    assert result.change_point is not None
    assert result.change_point.run_id == run_ids[40]
    assert result.change_point.scheduled_for == END - timedelta(hours=8) + timedelta(minutes=10)
    assert result.recent.runs == 12
    assert result.baseline.runs == 36
    assert (result.recent.start, result.recent.end) == (END - WINDOW, END)
    assert (result.baseline.start, result.baseline.end) == (END - WINDOW - BASELINE,
                                                            END - WINDOW)
    assert result.recent.value is not None
    assert result.baseline.value is not None
    assert result.recent.value > result.baseline.value


async def test_a_pinned_run_is_read_by_id_as_the_whole_baseline(session: AsyncSession) -> None:
    probe_id = await create_probe(session)
    run_ids = await hourly(session, probe_id, 48, step_at=38, step=1.3)
    pinned = await session.get(Run, run_ids[4])
    assert pinned is not None
    result = await drift_report(session, probe_id, "ttft", "p99", end=END, window=WINDOW,
                                baseline=pinned)
    assert result.report.verdict == "regressed"
    assert result.report.p_value is None
    assert (result.baseline.start, result.baseline.end, result.baseline.runs) == (None, None, 1)
    assert result.change_point is not None
    assert result.change_point.run_id == run_ids[38]


async def test_only_the_probes_finished_runs_of_the_window_and_metric_are_read(
        session: AsyncSession, monkeypatch: pytest.MonkeyPatch) -> None:
    probe_id = await create_probe(session)
    other_probe = await create_probe(session, "p2")
    rng = np.random.default_rng(3)
    start = END - WINDOW
    counted = [await create_run(session, probe_id, at, [100.0], rng)
               for at in (start, start + timedelta(hours=1), END - timedelta(microseconds=1))]
    # Left out: the window's end (exclusive), a run still running, another probe's run, a
    # run of the window with only another metric's sketch. All far slower, so the window's
    # value shows if one is read.
    await create_run(session, probe_id, END, [1000.0], rng)
    await create_run(session, probe_id, start + timedelta(hours=2), [1000.0], rng,
                     finished=False)
    await create_run(session, other_probe, start + timedelta(hours=3), [1000.0], rng)
    await create_run(session, probe_id, start + timedelta(hours=4), [1000.0], rng,
                     metric="e2e")
    await session.commit()

    seen: list[Sequence[SketchRow]] = []

    def recording(base_rows: Sequence[SketchRow], recent_rows: Sequence[SketchRow],
                  stat: str, *, pinned: bool) -> RunComparison:
        seen.append(recent_rows)
        return compare_runs(base_rows, recent_rows, stat, pinned=pinned)

    monkeypatch.setattr(drift_queries, "compare_runs", recording)
    result = await drift_report(session, probe_id, "ttft", "max", end=END, window=WINDOW,
                                baseline=BASELINE)
    assert [row[0] for row in seen[0]] == counted
    assert result.recent.runs == 3
    assert result.recent.value is not None
    assert result.recent.value < 200.0
    assert result.baseline.runs == 0
    assert result.report.verdict == "insufficient_data"


async def test_the_statistics_run_in_a_worker_thread_not_on_the_event_loop(
        session: AsyncSession, monkeypatch: pytest.MonkeyPatch) -> None:
    probe_id = await create_probe(session)
    run_ids = await hourly(session, probe_id, 48, step_at=40, step=1.3)
    threads: list[threading.Thread] = []

    def recording(base_rows: Sequence[SketchRow], recent_rows: Sequence[SketchRow],
                  stat: str, *, pinned: bool) -> RunComparison:
        threads.append(threading.current_thread())
        return compare_runs(base_rows, recent_rows, stat, pinned=pinned)

    monkeypatch.setattr(drift_queries, "compare_runs", recording)
    result = await drift_report(session, probe_id, "ttft", "p99", end=END, window=WINDOW,
                                baseline=BASELINE)
    assert len(threads) == 1
    assert threads[0] is not threading.current_thread()
    assert result.change_point is not None
    assert result.change_point.run_id == run_ids[40]
