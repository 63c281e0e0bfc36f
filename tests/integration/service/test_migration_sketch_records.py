"""Revision 0026 on real PostgreSQL: the per-sketch rows of `run_sketches` become one record
per run (in batches, the table dropped when empty), with the same figures, and come back as
rows on downgrade."""

from __future__ import annotations

import multiprocessing
import struct
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime

from ddsketch import DDSketch
from ddsketch.pb.proto import DDSketchProto
from sqlalchemy import text

from sustain.probes.measure import sketch_record
from sustain.probes.measure.sketch import RELATIVE_ACCURACY, MetricSketch
from sustain.service.db.engine import create_engine
from sustain.service.db.migrate import downgrade_to, upgrade_to, upgrade_to_head
from tests.integration.service.test_migrations import in_thread, tables

RUNS = 1_201
"""More runs than three conversion batches of 500 hold less one: the last batch is partial."""
START = datetime(2026, 11, 1, tzinfo=UTC)
QUANTILES = (0.0, 0.5, 0.9, 0.99, 1.0)


def legacy_bytes(values: list[float]) -> bytes:
    """A sketch as revision 0025's writer stored it: sum, min and max, then ddsketch's own
    protobuf of a sketch filled value by value (its store's spare bins included)."""
    sketch = DDSketch(RELATIVE_ACCURACY)
    for value in values:
        sketch.add(value)
    message: bytes = DDSketchProto.to_proto(  # type: ignore[no-untyped-call]
        sketch).SerializeToString()
    return struct.pack("<3d", sum(values), min(values), max(values)) + message


TTFT = [40.0 + i * 0.7 for i in range(50)]
E2E_STAGES = ([300.0], [410.0, 420.0, 900.0])
LEGACY = {(0, "ttft"): legacy_bytes(TTFT), (0, "e2e"): legacy_bytes(E2E_STAGES[0]),
          (1, "e2e"): legacy_bytes(E2E_STAGES[1])}


async def seed(url: str) -> None:
    """RUNS finished runs with LEGACY's sketch rows (run 1 also with a metric this code does
    not know), and one run without any."""
    engine = create_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text(
                "INSERT INTO endpoints (id, name, base_url, api_kind, model, timeout_connect_s, "
                "timeout_first_token_s, timeout_total_s, tls_verify) "
                "VALUES (1, 'e', 'http://x/v1', 'openai-chat', 'm', 1, 1, 1, true)"))
            await connection.execute(text(
                "INSERT INTO probes (id, name, endpoint_id, workload, profile, "
                "interval_seconds) VALUES (1, 'p', 1, '{}', '{\"kind\": \"single\"}', 60)"))
            await connection.execute(text(
                "INSERT INTO runs (id, probe_id, trigger, scheduled_for, status, attempts, "
                "successes) SELECT n, 1, 'schedule', "
                "CAST(:start AS timestamptz) + n * interval '1 minute', 'succeeded', 1, 1 "
                "FROM generate_series(1, :runs) AS n"),
                {"start": START, "runs": RUNS + 1})
            for (stage, metric), data in LEGACY.items():
                sketch = MetricSketch.from_bytes(data)
                await connection.execute(text(
                    "INSERT INTO run_sketches (run_id, stage, metric, count, sum, min, max, "
                    "sketch) SELECT n, :stage, :metric, :count, :sum, :min, :max, :sketch "
                    "FROM generate_series(1, :runs) AS n"),
                    {"stage": stage, "metric": metric, "count": sketch.count,
                     "sum": sketch.sum, "min": sketch.min, "max": sketch.max, "sketch": data,
                     "runs": RUNS})
            await connection.execute(text(
                "INSERT INTO run_sketches (run_id, stage, metric, count, sum, min, max, sketch) "
                "VALUES (1, 0, 'retired', 1, 1, 1, 1, :sketch)"),
                {"sketch": legacy_bytes([1.0])})
    finally:
        await engine.dispose()


def figures(sketch: MetricSketch) -> tuple[object, ...]:
    return (sketch.count, sketch.sum, sketch.min, sketch.max,
            *(sketch.quantile(q) for q in QUANTILES))


async def test_run_sketches_become_one_record_per_run_and_rows_again_on_downgrade(
        empty_database_url: str) -> None:
    url = empty_database_url
    in_thread(upgrade_to, url, "0025")
    await seed(url)

    in_thread(upgrade_to_head, url)
    assert "run_sketches" not in await tables(url)
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            records = {run_id: record for run_id, record in await connection.execute(text(
                "SELECT id, sketches FROM runs ORDER BY id"))}
    finally:
        await engine.dispose()
    assert len(records) == RUNS + 1
    assert records.pop(RUNS + 1) is None, "a run without sketches has no record"
    expected = {key: figures(MetricSketch.from_bytes(data)) for key, data in LEGACY.items()}
    for record in records.values():
        found = {(stage, metric): figures(MetricSketch.load(packed))
                 for stage, metric, packed in sketch_record.unpack(bytes(record))}
        assert found == expected, "every run's sketches, the unknown metric left out"
    assert len(records[2]) < 400, "a record is a few hundred bytes, not a kilobyte a sketch"

    in_thread(downgrade_to, url, "0025")
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            rows = list(await connection.execute(text(
                "SELECT run_id, stage, metric, sketch FROM run_sketches ORDER BY run_id")))
            columns = {r[0] for r in await connection.execute(text(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'runs'"))}
    finally:
        await engine.dispose()
    assert "sketches" not in columns
    assert len(rows) == RUNS * len(LEGACY)
    assert {(stage, metric): figures(MetricSketch.from_bytes(bytes(data)))
            for run_id, stage, metric, data in rows if run_id == 7} == expected


def _migrate(url: str) -> str:
    """One replica's start: migrate to head; what it raised, if anything."""
    try:
        upgrade_to_head(url)
    except Exception as error:  # noqa: BLE001 - the test reports whatever a replica raised
        return f"{type(error).__name__}: {error}"
    return "ok"


def test_replicas_migrating_at_once_all_start(empty_database_url: str) -> None:
    """0026 commits in batches, which ends the migration's transaction early; the migration
    lock is held for the whole run, so the other replicas wait, then find the schema at head
    (with a transaction lock a second one ran 0026 again and failed three times in four)."""
    with ProcessPoolExecutor(3, mp_context=multiprocessing.get_context("spawn")) as pool:
        answers = list(pool.map(_migrate, [empty_database_url] * 3))
    assert answers == ["ok"] * 3
