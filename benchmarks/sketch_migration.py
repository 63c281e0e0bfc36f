"""Converting a week of run sketches into records (revision 0026), measured before and after.

A fresh database at revision 0025 is seeded with one probe's week of one-minute
single-request runs (--days 7: 10,080 runs; their summaries empty, so `runs` is the row and
its indexes), each with the 11 sketch rows 0025's writer
stored for a streamed chat request (`ttft`, `ttfo`, `ttfb`, `tpot`, `answer_tpot`, `itl` of 63
gaps, `e2e`, `corrected_e2e`, `lag`, `output_tokens`, `reasoning_share`: ddsketch's own
protobuf of a sketch filled value by value, as that writer serialised it). Then `upgrade_to_head`
runs 0026, which converts the rows into one record per run in batches of 500 runs (a statement
and a transaction each) and drops the table.

Reports: bytes of `runs` and `run_sketches` before and of `runs` after (heap, TOAST and indexes,
after `VACUUM (FULL, ANALYZE)`), the conversion's wall time, runs converted per second and
the longest batch (what one statement held its locks for; from the migration's log), and
whether every run's figures (count, sum, min, max, p50, p90, p99 of each metric) read the
same from its record as from its rows before.

No target of its own: issue-level goals are the storage benchmark's bytes per run; this one
shows the conversion of existing data is bounded per batch and loses nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import re
import struct
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import SERVER_URL, record

DATABASE = "sustain_bench_sketch_migration"
METRICS = ("ttft", "ttfo", "ttfb", "tpot", "answer_tpot", "itl", "e2e", "corrected_e2e",
           "lag", "output_tokens", "reasoning_share")
QUANTILES = (0.5, 0.9, 0.99)
START = datetime(2026, 11, 28, tzinfo=UTC)


def values_of(rng: random.Random) -> dict[str, list[float]]:
    """One streamed chat request's sketched values (64 tokens: 63 gaps), in ms or units."""
    ttft = rng.lognormvariate(3.7, 0.3)
    gaps = [rng.lognormvariate(2.1, 0.3) for _ in range(63)]
    e2e = ttft + sum(gaps)
    return {"ttft": [ttft], "ttfo": [ttft], "ttfb": [rng.uniform(0.3, 0.8)],
            "tpot": [sum(gaps) / 63], "answer_tpot": [sum(gaps) / 63], "itl": gaps,
            "e2e": [e2e], "corrected_e2e": [e2e + rng.uniform(0, 1)],
            "lag": [rng.uniform(0.1, 0.5)], "output_tokens": [64.0], "reasoning_share": [1.0]}


def legacy_bytes(values: list[float]) -> bytes:
    """A sketch as revision 0025 stored it: sum, min and max, then ddsketch's protobuf of a
    sketch filled value by value (its store's spare bins included)."""
    from ddsketch import DDSketch
    from ddsketch.pb.proto import DDSketchProto

    from sustain.probes.measure.sketch import RELATIVE_ACCURACY

    sketch = DDSketch(RELATIVE_ACCURACY)
    for value in values:
        sketch.add(value)
    message: bytes = DDSketchProto.to_proto(sketch).SerializeToString()  # type: ignore[no-untyped-call]
    return struct.pack("<3d", sum(values), min(values), max(values)) + message


Figures = tuple[float | int | None, ...]


def figures(sketch: object) -> Figures:
    from sustain.probes.measure.sketch import MetricSketch

    assert isinstance(sketch, MetricSketch)
    return (sketch.count, sketch.sum, sketch.min, sketch.max,
            *(sketch.quantile(q) for q in QUANTILES))


async def seed(url: str, runs: int) -> dict[tuple[int, str], Figures]:
    """The runs and their legacy sketch rows; each (run, metric)'s figures as stored."""
    import asyncpg

    from benchmarks.common import asyncpg_dsn
    from sustain.probes.measure.sketch import MetricSketch

    rng = random.Random(7)
    connection = await asyncpg.connect(asyncpg_dsn(url))
    expected: dict[tuple[int, str], Figures] = {}
    try:
        await connection.execute(
            "INSERT INTO endpoints (id, name, base_url, api_kind, model, timeout_connect_s, "
            "timeout_first_token_s, timeout_total_s, tls_verify) "
            "VALUES (1, 'e', 'http://x/v1', 'openai-chat', 'm', 1, 1, 1, true)")
        await connection.execute(
            "INSERT INTO probes (id, name, endpoint_id, workload, profile, interval_seconds) "
            "VALUES (1, 'p', 1, '{}', '{\"kind\": \"single\"}', 60)")
        await connection.execute(
            "INSERT INTO runs (id, probe_id, trigger, scheduled_for, status, attempts, "
            "successes, summary) SELECT n, 1, 'schedule', "
            "$1::timestamptz + n * interval '1 minute', 'succeeded', 1, 1, '{}' "
            "FROM generate_series(1, $2) AS n", START, runs)
        rows = []
        for run_id in range(1, runs + 1):
            for metric, values in values_of(rng).items():
                data = legacy_bytes(values)
                sketch = MetricSketch.from_bytes(data)
                expected[(run_id, metric)] = figures(sketch)
                rows.append((run_id, 0, metric, sketch.count, sketch.sum, sketch.min,
                             sketch.max, data))
        await connection.copy_records_to_table(
            "run_sketches", records=rows,
            columns=["run_id", "stage", "metric", "count", "sum", "min", "max", "sketch"])
    finally:
        await connection.close()
    return expected


async def sizes(url: str, tables: tuple[str, ...]) -> dict[str, int]:
    import asyncpg

    from benchmarks.common import asyncpg_dsn

    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await connection.execute("VACUUM (FULL, ANALYZE)")
        return {table: int(await connection.fetchval(
            "SELECT coalesce(pg_total_relation_size(to_regclass($1)), 0)", table))
            for table in tables}
    finally:
        await connection.close()


async def records(url: str) -> dict[int, bytes | None]:
    import asyncpg

    from benchmarks.common import asyncpg_dsn

    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        return {int(r[0]): None if r[1] is None else bytes(r[1])
                for r in await connection.fetch("SELECT id, sketches FROM runs")}
    finally:
        await connection.close()


class Batches(logging.Handler):
    """Collects the migration's per-batch log lines (`run sketches: batch of N runs in X ms`)."""

    def __init__(self) -> None:
        super().__init__()
        self.ms: list[float] = []

    def emit(self, entry: logging.LogRecord) -> None:
        found = re.search(r"batch of \d+ runs in ([\d.]+) ms", entry.getMessage())
        if found:
            self.ms.append(float(found[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default=SERVER_URL)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    from benchmarks.common import drop_database, empty_database
    from sustain.probes.measure import sketch_record
    from sustain.probes.measure.sketch import MetricSketch
    from sustain.service.db.migrate import upgrade_to, upgrade_to_head

    runs = round(args.days * 1440)
    url = empty_database(args.server_url, DATABASE)
    try:
        upgrade_to(url, "0025")
        t0 = time.perf_counter()
        expected = asyncio.run(seed(url, runs))
        seed_s = time.perf_counter() - t0
        before = asyncio.run(sizes(url, ("runs", "run_sketches")))
        batches = Batches()
        logger = logging.getLogger("alembic.runtime.migration")
        logger.addHandler(batches)
        logger.setLevel(logging.DEBUG)
        t0 = time.perf_counter()
        upgrade_to_head(url)
        convert_s = time.perf_counter() - t0
        after = asyncio.run(sizes(url, ("runs", "run_sketches")))
        stored = asyncio.run(records(url))
    finally:
        drop_database(args.server_url, DATABASE)

    same = 0
    for run_id in range(1, runs + 1):
        record_bytes = stored.get(run_id)
        found = {} if record_bytes is None else {
            metric: figures(MetricSketch.load(packed))
            for _, metric, packed in sketch_record.unpack(record_bytes)}
        same += found == {metric: expected[(run_id, metric)] for metric in METRICS}
    before_total = before["runs"] + before["run_sketches"]
    headline = (f"{runs:,} runs converted in {convert_s:.1f} s "
                f"({runs / convert_s:,.0f} runs/s), longest batch "
                f"{max(batches.ms, default=0.0):,.0f} ms; {before_total / runs:,.0f} -> "
                f"{after['runs'] / runs:,.0f} B per run; {same:,}/{runs:,} runs' figures the same")
    body = "\n".join([
        f"One probe's {args.days:g} days of one-minute single-request runs ({runs:,}), each "
        f"with the 11 sketch rows revision 0025 stored for a streamed chat request (seeded in "
        f"{seed_s:.0f} s), then `upgrade_to_head` (revision 0026: batches of 500 runs, a "
        f"statement and a transaction each). PostgreSQL 15 on this machine, nothing else "
        f"running against it. Sizes after `VACUUM (FULL, ANALYZE)`, heap, TOAST and indexes.",
        "",
        "| | runs | run_sketches | together | per run |",
        "|---|---|---|---|---|",
        f"| before (0025) | {before['runs']:,} B | {before['run_sketches']:,} B | "
        f"{before_total:,} B | {before_total / runs:,.0f} B |",
        f"| after (0026) | {after['runs']:,} B | (dropped) | {after['runs']:,} B | "
        f"{after['runs'] / runs:,.0f} B |",
        "",
        f"- conversion: {convert_s:.1f} s for {runs:,} runs, {runs / convert_s:,.0f} runs/s; "
        f"{len(batches.ms)} batches, median "
        f"{sorted(batches.ms)[len(batches.ms) // 2] if batches.ms else 0:,.0f} ms, longest "
        f"{max(batches.ms, default=0.0):,.0f} ms (each one statement, its locks held that long)",
        f"- figures (count, sum, min, max, p50, p90, p99 of each of the 11 metrics) the same "
        f"from the record as from the rows: {same:,} of {runs:,} runs",
    ])
    if args.no_record:
        print(body)
    else:
        record("sketch migration: a week of run sketches converted to records",
               "python " + " ".join(sys.argv), body, headline=headline)


if __name__ == "__main__":
    main()
