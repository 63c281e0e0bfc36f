"""Converting a week of runs' JSONB summaries into summary records (revision 0028 and the
storage job), measured before and after.

Real summaries first: a handful of single-request streamed chat runs measured against the
simulator and stored at head, their whole summaries read back. Then a fresh database at
revision 0027 is seeded with one probe's week of one-minute runs (--days 7: 10,080), each
run's summary one of those with every fractional number scaled by its own random factor (so
no two runs store the same digits), as JSONB, as 0027's writer stored it. `upgrade_to_head`
runs 0028 (a column added: no rewrite), then the storage job's
`summary_records.convert_old` converts the runs in batches of 500 (a transaction each),
timed batch by batch.

Reports: bytes of `runs` before and after (heap, TOAST and indexes, after `VACUUM (FULL,
ANALYZE)`), the conversion's wall time, runs per second, the longest batch (how long one
transaction held its rows), and whether every run's whole summary reads back equal to what
was seeded and its JSONB to the summary's SQL keys.

No target of its own: the storage benchmark's bytes per run is the target; this one shows the
conversion of existing data is bounded per batch, resumable and loses nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import SERVER_URL, record

DATABASE = "sustain_bench_summary_conversion"
SCRATCH = "sustain_bench_summary_conversion_real"
REAL_RUNS = 8
START = datetime(2026, 11, 28, tzinfo=UTC)


def scaled(value: Any, factor: float) -> Any:
    """`value` with every float in it that has a fraction times `factor` (whole numbers,
    text and structure kept: a count stays a count, and a figure gains no digits)."""
    if isinstance(value, float) and not value.is_integer():
        return value * factor
    if isinstance(value, dict):
        return {key: scaled(item, factor) for key, item in value.items()}
    if isinstance(value, list):
        return [scaled(item, factor) for item in value]
    return value


async def real_summaries(server_url: str) -> list[dict[str, Any]]:
    """REAL_RUNS single-request runs measured against the simulator and stored at head;
    their whole summaries as stored."""
    from benchmarks.common import Simulator, drop_database, fresh_database
    from benchmarks.storage import SIMULATOR_ARGS, create_probes, measure_and_store
    from sustain.service.db.engine import create_engine
    from sustain.service.runs import summary_record as summaries

    url = await asyncio.to_thread(fresh_database, server_url, SCRATCH)
    try:
        with Simulator(SIMULATOR_ARGS) as simulator:
            single, _ = await create_probes(url, simulator.base_url, 1.0, 1.0)
            ticks = [START - timedelta(minutes=i + 1) for i in range(REAL_RUNS)]
            await measure_and_store(url, single, ticks, REAL_RUNS)
        engine = create_engine(url)
        try:
            async with engine.connect() as connection:
                from sqlalchemy import text
                rows = await connection.execute(text(
                    "SELECT summary, summary_record FROM runs WHERE probe_id = :p"),
                    {"p": single})
                found = [summaries.whole(kept, record) for kept, record in rows]
        finally:
            await engine.dispose()
    finally:
        await asyncio.to_thread(drop_database, server_url, SCRATCH)
    return [summary for summary in found if summary]


async def seed(url: str, runs: int, models: list[dict[str, Any]]) -> dict[int, Any]:
    """The week of runs as 0027 stored them; each run's summary as seeded (parsed back from
    its JSON, as the database returns it)."""
    import asyncpg

    from benchmarks.common import asyncpg_dsn
    from sustain.service.strict_json import dumps

    rng = random.Random(7)
    expected: dict[int, Any] = {}
    rows = []
    for run_id in range(1, runs + 1):
        text = dumps(scaled(rng.choice(models), rng.uniform(0.8, 1.25)))
        expected[run_id] = json.loads(text)
        rows.append((run_id, 1, "schedule", START + timedelta(minutes=run_id),
                     START + timedelta(minutes=run_id, seconds=1), "succeeded", 1, 1, text))
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await connection.execute(
            "INSERT INTO endpoints (id, name, base_url, api_kind, model, timeout_connect_s, "
            "timeout_first_token_s, timeout_total_s, tls_verify) "
            "VALUES (1, 'e', 'http://x/v1', 'openai-chat', 'm', 1, 1, 1, true)")
        await connection.execute(
            "INSERT INTO probes (id, name, endpoint_id, workload, profile, interval_seconds) "
            "VALUES (1, 'p', 1, '{}', '{\"kind\": \"single\"}', 60)")
        await connection.executemany(
            "INSERT INTO runs (id, probe_id, trigger, scheduled_for, finished_at, status, "
            "attempts, successes, summary) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "
            "CAST($9 AS jsonb))", rows)
    finally:
        await connection.close()
    return expected


async def convert(url: str) -> tuple[float, list[float]]:
    """The storage job's conversion, batch by batch as convert_old runs it; (seconds in all,
    milliseconds per batch)."""
    from sustain.service.db.engine import create_engine
    from sustain.service.db.summary_records import convert_batch

    engine = create_engine(url)
    batches: list[float] = []
    try:
        after = 0
        t0 = time.perf_counter()
        while True:
            b0 = time.perf_counter()
            async with engine.begin() as connection:
                looked, after = await convert_batch(connection, after)
            if not looked:
                break
            batches.append((time.perf_counter() - b0) * 1000)
        return time.perf_counter() - t0, batches
    finally:
        await engine.dispose()


async def same_as_seeded(url: str, expected: dict[int, Any]) -> tuple[int, int]:
    """(runs whose whole summary reads back as seeded, runs whose JSONB is its SQL keys)."""
    from sqlalchemy import text

    from sustain.service.db.engine import create_engine
    from sustain.service.runs import summary_record as summaries

    engine = create_engine(url)
    whole = kept = 0
    try:
        async with engine.connect() as connection:
            for run_id, json_part, packed in await connection.execute(text(
                    "SELECT id, summary, summary_record FROM runs")):
                summary = summaries.whole(json_part, packed)
                whole += packed is not None and summary == expected[int(run_id)]
                kept += json_part == summaries.sql_part(expected[int(run_id)])
    finally:
        await engine.dispose()
    return whole, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default=SERVER_URL)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    from benchmarks.common import drop_database, empty_database
    from benchmarks.sketch_migration import sizes
    from sustain.service.db.migrate import upgrade_to, upgrade_to_head

    runs = round(args.days * 1440)
    models = asyncio.run(real_summaries(args.server_url))
    model_bytes = sum(len(json.dumps(m)) for m in models) / len(models)
    url = empty_database(args.server_url, DATABASE)
    try:
        upgrade_to(url, "0027")
        t0 = time.perf_counter()
        expected = asyncio.run(seed(url, runs, models))
        seed_s = time.perf_counter() - t0
        before = asyncio.run(sizes(url, ("runs",)))["runs"]
        t0 = time.perf_counter()
        upgrade_to_head(url)
        upgrade_s = time.perf_counter() - t0
        convert_s, batches = asyncio.run(convert(url))
        after = asyncio.run(sizes(url, ("runs",)))["runs"]
        whole, kept = asyncio.run(same_as_seeded(url, expected))
    finally:
        drop_database(args.server_url, DATABASE)

    longest = max(batches, default=0.0)
    median = sorted(batches)[len(batches) // 2] if batches else 0.0
    headline = (f"{runs:,} runs converted in {convert_s:.1f} s ({runs / convert_s:,.0f} "
                f"runs/s), longest batch {longest:,.0f} ms; runs {before / runs:,.0f} -> "
                f"{after / runs:,.0f} B per run; {whole:,}/{runs:,} summaries the same")
    body = "\n".join([
        f"One probe's {args.days:g} days of one-minute single-request runs ({runs:,}), each "
        f"with a JSONB summary as revision 0027 stored it: one of {len(models)} real "
        f"summaries (single-request streamed chat runs measured against the simulator, "
        f"{model_bytes:,.0f} B of JSON on average) with every fractional number scaled by a "
        f"factor of its own (seeded in {seed_s:.0f} s). Then `upgrade_to_head` "
        f"(revision 0028, a column added: {upgrade_s:.1f} s) and the storage job's "
        f"conversion (`convert_old`: batches of 500 runs, a transaction each). PostgreSQL 15 "
        f"on this machine, nothing else "
        f"running against it. Sizes after `VACUUM (FULL, ANALYZE)`, heap, TOAST and indexes.",
        "",
        "| | runs | per run |",
        "|---|---|---|",
        f"| before (0027: the whole summary as JSONB) | {before:,} B | {before / runs:,.0f} B |",
        f"| after (0028: record, and the SQL keys as JSONB) | {after:,} B | "
        f"{after / runs:,.0f} B |",
        "",
        f"- conversion: {convert_s:.1f} s for {runs:,} runs, {runs / convert_s:,.0f} runs/s; "
        f"{len(batches)} batches, median {median:,.0f} ms, longest {longest:,.0f} ms (each a "
        f"transaction, its rows locked that long)",
        f"- whole summary read back (record) equal to the one seeded: {whole:,} of {runs:,} "
        f"runs; JSONB equal to the summary's SQL keys: {kept:,} of {runs:,}",
    ])
    if args.no_record:
        print(body)
    else:
        record("summary conversion: a week of JSONB summaries converted to records",
               "python " + " ".join(sys.argv), body, headline=headline)


if __name__ == "__main__":
    main()
