"""Query: windowed history of one probe over 30 days of stored runs, through the REST API of a
real `sustain serve` on the machine's PostgreSQL.

Seeding (the documented bulk loader): 43,200 runs, one per minute for the 30 days before the
seed time, 200 samples each (8.64 M samples), are written through the write path's own
`store()` in batches of 25 runs (5,000 samples), exactly as the SampleWriter writes them: raw
samples into the daily partitions, then each run's final record with its sketches and the
hourly and daily rollups. To keep seeding within minutes, runs are drawn from 40 generated
templates (lognormal TTFT, 8 ITL gaps, one failure in 40) shifted to their scheduled time;
the tables, rows and rollups are the same as live runs give. `--reuse` keeps a seeded
database from an earlier invocation.

Timed: `GET /probes/{id}/series?metric=ttft&stat=p99&step=1h` over the 30 days (720 points)
and `GET /probes/{id}/summary?window=30d`, 20 times each after 2 warm-up calls, over loopback
HTTP; the figure is the median. `EXPLAIN (ANALYZE, BUFFERS)` of the main SQL of each is
printed.

Target: < 200 ms each, median of 20.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import uvloop
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import SERVER_URL, Service, database_url, fresh_database, record
from sustain.service.db import partitions
from sustain.service.db.engine import create_engine
from sustain.service.ingest.store import store
from sustain.service.runs.finals import RunFinal
from sustain.service.runs.rows import SampleTuple, sample_tuple
from tests.integration.service.storage import create_probe_rows, final_of, synthetic_samples

DATABASE = "sustain_bench_query"
RUNS = 43_200
RUN_SAMPLES = 200
TEMPLATES = 40
BATCH_RUNS = 25
TARGET_MS = 200.0
REPEAT = 20


def _templates(rng: random.Random) -> list[tuple[list[SampleTuple], RunFinal]]:
    """Rows (run_id, pos and sent_at to be replaced) and final record of template runs
    starting at the epoch."""
    origin = datetime(1970, 1, 1, tzinfo=UTC)
    out = []
    for _ in range(TEMPLATES):
        samples = synthetic_samples(RUN_SAMPLES, origin, rng, fail_every=40)
        rows = [sample_tuple(0, pos, 0, s) for pos, s in enumerate(samples)]
        out.append((rows, final_of(0, 0, origin, samples)))
    return out


async def seed(url: str, end: datetime, runs: int) -> tuple[int, float]:
    """Probe id and seconds taken."""
    started = time.perf_counter()
    engine = create_engine(url)
    try:
        probe_id = await create_probe_rows(engine, "bench")
        first = end - timedelta(minutes=runs)
        async with engine.begin() as connection:
            run_ids = [r for (r,) in await connection.execute(text(
                "INSERT INTO runs (probe_id, trigger, scheduled_for, status, started_at) "
                "SELECT :p, 'schedule', t, 'running', t FROM generate_series("
                "CAST(:a AS timestamptz), CAST(:b AS timestamptz), interval '1 minute') AS t "
                "ORDER BY t RETURNING id"), {"p": probe_id, "a": first,
                                            "b": end - timedelta(minutes=1)})]
            days = {partitions.utc_day(first + timedelta(days=d)) for d in range(32)}
            await partitions.ensure(connection, days)
        assert len(run_ids) == runs
        templates = _templates(random.Random(5))
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        for batch_start in range(0, runs, BATCH_RUNS):
            rows: list[SampleTuple] = []
            finals: list[RunFinal] = []
            for i in range(batch_start, min(batch_start + BATCH_RUNS, runs)):
                scheduled = first + timedelta(minutes=i)
                shift = scheduled - epoch
                template_rows, template_final = templates[i % TEMPLATES]
                run_id = run_ids[i]
                rows.extend((run_id, r[1], probe_id, *r[3:5], r[5] + shift, *r[6:])
                            for r in template_rows)
                finals.append(replace(template_final, run_id=run_id, probe_id=probe_id,
                                      scheduled_for=scheduled))
            async with engine.begin() as connection:
                await store(connection, rows, finals)
            if batch_start % (BATCH_RUNS * 200) == 0:
                print(f"seeded {batch_start + BATCH_RUNS:,} of {runs:,} runs "
                      f"({time.perf_counter() - started:.0f} s)", flush=True)
        async with engine.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.execute(text("VACUUM ANALYZE"))
    finally:
        await engine.dispose()
    return probe_id, time.perf_counter() - started


async def seeded(url: str, runs: int) -> tuple[int, datetime] | None:
    """The probe id and end of an earlier complete seed, if there is one."""
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            row = (await connection.execute(text(
                "SELECT r.probe_id, max(r.scheduled_for), count(*) FROM runs r "
                "WHERE r.status = 'succeeded' GROUP BY r.probe_id"))).first()
    except Exception:  # noqa: BLE001 - any failure means no runs to report
        return None
    finally:
        await engine.dispose()
    if row is None or row[2] != runs:
        return None
    return int(row[0]), row[1] + timedelta(minutes=1)


EXPLAINS = {
    "series: hourly rollup sketches of ttft over 30 days": (
        "SELECT extract(epoch FROM start), metric, sketch FROM rollup_sketches "
        "WHERE probe_id = :p AND metric IN ('ttft') AND width_s = 3600 "
        "AND start >= :a AND start <= :b"),
    "summary: daily rollup sketches of all metrics over 30 days": (
        "SELECT extract(epoch FROM start), metric, sketch FROM rollup_sketches "
        "WHERE probe_id = :p AND metric IN ('ttft', 'itl', 'tpot', 'e2e', 'corrected_e2e', "
        "'lag') AND width_s = 86400 AND start >= :a AND start <= :b"),
}


async def explain(url: str, probe_id: int, end: datetime) -> str:
    engine = create_engine(url)
    out = []
    try:
        async with engine.connect() as connection:
            for title, sql in EXPLAINS.items():
                plan = await connection.execute(
                    text(f"EXPLAIN (ANALYZE, BUFFERS) {sql}"),
                    {"p": probe_id, "a": end - timedelta(days=30), "b": end})
                out.append(f"{title}:\n\n```\n" + "\n".join(r[0] for r in plan) + "\n```")
    finally:
        await engine.dispose()
    return "\n\n".join(out)


def timed(api: httpx.Client, path: str, params: dict[str, str]
          ) -> tuple[list[float], dict[str, Any]]:
    times = []
    body: dict[str, Any] = {}
    for i in range(REPEAT + 2):
        t0 = time.perf_counter()
        r = api.get(path, params=params)
        elapsed = (time.perf_counter() - t0) * 1000
        r.raise_for_status()
        body = r.json()
        if i >= 2:
            times.append(elapsed)
    return times, body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default=SERVER_URL)
    parser.add_argument("--reuse", action="store_true",
                        help="keep a database seeded by an earlier run")
    parser.add_argument("--runs", type=int, default=RUNS, help="fewer for a quick trial")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    runs = args.runs

    url = database_url(args.server_url, DATABASE)
    found = uvloop.run(seeded(url, runs)) if args.reuse else None
    seed_note = "reused the seeded database"
    if found is None:
        url = fresh_database(args.server_url, DATABASE)
        end = datetime.now(UTC).replace(second=0, microsecond=0)
        probe_id, seconds = uvloop.run(seed(url, end, runs))
        seed_note = (f"seeded {runs:,} runs x {RUN_SAMPLES} samples in {seconds:.0f} s "
                     f"({runs * RUN_SAMPLES / seconds:,.0f} samples/s with sketches and "
                     f"rollups)")
    else:
        probe_id, end = found
    print(seed_note, flush=True)

    start = end - timedelta(days=30)
    keep_samples = {"SUSTAIN_SAMPLE_RETENTION_DAYS": "60"}  # all 30 days of raw samples stay
    with Service(url, keep_samples) as service, \
            httpx.Client(base_url=service.base_url, timeout=30) as api:
        series_ms, series = timed(api, f"/api/v1/probes/{probe_id}/series", {
            "metric": "ttft", "stat": "p99", "step": "1h", "from": start.isoformat(),
            "to": end.isoformat()})
        summary_ms, summary = timed(api, f"/api/v1/probes/{probe_id}/summary", {
            "window": "30d", "to": end.isoformat()})
    plans = asyncio.run(explain(url, probe_id, end))
    print(plans)

    def row(name: str, times: list[float]) -> str:
        median = statistics.median(times)
        return (f"| {name} | **{median:.1f}** | {min(times):.1f} | {max(times):.1f} | "
                f"{TARGET_MS / median:.1f}x |")

    ttft = summary["metrics"]["ttft"]
    body = (
        f"One probe, {runs:,} runs (one per minute) x {RUN_SAMPLES} samples = "
        f"{runs * RUN_SAMPLES:,} samples in PostgreSQL 15 on this machine; {seed_note}. "
        f"Times over loopback HTTP to `sustain serve`, {REPEAT} calls after 2 warm-ups, in ms:"
        f"\n\n| request | median | min | max | target / median |\n|---|---|---|---|---|\n"
        f"{row('series?metric=ttft&stat=p99&step=1h, 30 days', series_ms)}\n"
        f"{row('summary?window=30d', summary_ms)}\n\n"
        f"The series has {len(series['points'])} points; the summary covers "
        f"{summary['runs']:,} runs and {ttft['count']:,} TTFT values (p99 "
        f"{ttft['p99']:.1f} ms).\n\nTarget: < {TARGET_MS:.0f} ms each, median of {REPEAT}.\n\n"
        f"{plans}"
    )
    if args.no_record:
        print(body)
    else:
        record("query: 30 days of history over REST", "python " + " ".join(sys.argv), body,
               headline=f"median: series {statistics.median(series_ms):.1f} ms, summary "
                        f"{statistics.median(summary_ms):.1f} ms")


if __name__ == "__main__":
    main()
