"""Packing a week of raw samples into blocks (the storage job on a history stored as rows),
measured before and after.

A fresh database at head is seeded with a week (--days 7) of two probes' runs, as rows, as a
database upgraded from before revision 0027 holds them: a one-minute single-request probe
(10,080 runs of one sample) and an hourly load probe (168 runs of --load-samples, 2,000, 50 ms
apart: 336,000 samples), each sample a streamed chat request as the client records it (times
read in whole ns off the monotonic clock; lag, corrected E2E and TPOT as Sample computes
them; a W3C trace id). Then `sample_packing.pack_finished` packs everything finished, as the
hourly job does: transactions of at most 20,000 samples, one after the other.

Reports: bytes of `samples` and `sample_blocks` before and after (heap, TOAST and indexes,
every daily partition, after `VACUUM (FULL, ANALYZE)`), the packing's wall time, samples per
second, the longest transaction, and whether every sample reads back the same (all columns,
floats bit for bit) from the blocks as from the rows before.

No target of its own: the storage benchmark's bytes per sample is the target; this one shows
the conversion of a history already stored is bounded per transaction and loses nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import secrets
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import SERVER_URL, record

DATABASE = "sustain_bench_sample_packing"
START = datetime(2026, 11, 28, tzinfo=UTC)


def requests(count: int, start: datetime, rng: random.Random) -> list[Any]:
    """`count` streamed chat requests 50 ms apart, as Samples (ns readings over 1e6)."""
    from sustain.probes.measure.sample import Measurement, Sample

    out = []
    for seq in range(count):
        send_ns = seq * 50_000_000 + int(rng.expovariate(1 / 80_000))
        ttft_ns = int(40e6 * rng.lognormvariate(0, 0.3))
        gaps = tuple(int(8e6 * rng.lognormvariate(0, 0.3)) / 1e6 for _ in range(63))
        e2e_ns = ttft_ns + int(sum(gaps) * 1e6)
        measurement = Measurement(
            ttft_ms=ttft_ns / 1e6, itl_ms=gaps, e2e_ms=e2e_ns / 1e6, output_tokens=64,
            tokens_server_counted=True, input_tokens=32, http_status=200, error_class=None,
            streamed=True,
            ttfb_ms=int(rng.uniform(0.3e6, 0.9e6)) / 1e6, connection_reused=seq > 0,
            connect_ms=0.2 if seq == 0 else None, trace_id=secrets.token_hex(16))
        out.append(Sample(seq=seq, stage=0, t_sched_ms=seq * 50.0, t_send_ms=send_ns / 1e6,
                          sent_at=start + timedelta(microseconds=send_ns // 1000),
                          measurement=measurement))
    return out


async def seed(url: str, days: float, load_samples: int) -> int:
    """The two probes' runs (finished) and their sample rows; samples written."""
    from sqlalchemy import text

    from sustain.service.db import partitions, samples
    from sustain.service.db.engine import create_engine
    from sustain.service.runs.rows import sample_tuple

    rng = random.Random(7)
    engine = create_engine(url)
    written = 0
    try:
        async with engine.begin() as connection:
            await connection.execute(text(
                "INSERT INTO endpoints (id, name, base_url, api_kind, model, timeout_connect_s, "
                "timeout_first_token_s, timeout_total_s, tls_verify) "
                "VALUES (1, 'e', 'http://x/v1', 'openai-chat', 'm', 1, 1, 1, true)"))
            await connection.execute(text(
                "INSERT INTO probes (id, name, endpoint_id, workload, profile, "
                "interval_seconds) VALUES (1, 'heartbeat', 1, '{}', '{\"kind\": \"single\"}', "
                "60), (2, 'load', 1, '{}', '{\"kind\": \"single\"}', 3600)"))
            await partitions.ensure(connection, {
                partitions.utc_day(START + timedelta(days=d)) for d in range(int(days) + 2)})
        plan = [(1, START + timedelta(minutes=i), 1) for i in range(round(days * 1440))]
        plan += [(2, START + timedelta(hours=i), load_samples) for i in range(round(days * 24))]
        for chunk in range(0, len(plan), 500):
            async with engine.begin() as connection:
                for probe_id, at, count in plan[chunk:chunk + 500]:
                    run_id = (await connection.execute(text(
                        "INSERT INTO runs (probe_id, trigger, scheduled_for, status, "
                        "started_at, finished_at, attempts, successes) VALUES (:p, "
                        "'schedule', :at, 'succeeded', :at, :done, "
                        ":n, :n) RETURNING id"), {"p": probe_id, "at": at, "n": count,
                                                   "done": at + timedelta(minutes=2)})
                    ).scalar_one()
                    rows = [sample_tuple(run_id, pos, probe_id, sample)
                            for pos, sample in enumerate(requests(count, at, rng))]
                    await samples.insert(connection, rows)
                    written += len(rows)
    finally:
        await engine.dispose()
    return written


async def sizes(url: str) -> dict[str, int]:
    """Bytes of each table group after `VACUUM (FULL, ANALYZE)`, partitions summed."""
    import asyncpg

    from benchmarks.common import asyncpg_dsn

    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await connection.execute("VACUUM (FULL, ANALYZE)")
        out: dict[str, int] = {}
        for parent in ("samples", "sample_blocks"):
            out[parent] = int(await connection.fetchval(
                "SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0) FROM pg_inherits i "
                "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = $1", parent))
        return out
    finally:
        await connection.close()


async def everything(url: str) -> list[tuple[Any, ...]]:
    """Every sample, rows and blocks decoded, in (run_id, pos) order."""
    from sqlalchemy import text

    from sustain.service.db.engine import create_engine
    from sustain.service.runs import sample_block
    from sustain.service.runs.rows import STORED_COLUMNS

    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            rows = [tuple(r) for r in await connection.execute(text(
                f"SELECT {', '.join(STORED_COLUMNS)} FROM samples"))]
            for run_id, probe_id, data in await connection.execute(text(
                    "SELECT run_id, probe_id, data FROM sample_blocks")):
                rows.extend(sample_block.unpack(bytes(data), run_id, probe_id))
    finally:
        await engine.dispose()
    return sorted(rows, key=lambda row: (row[0], row[1]))


async def pack(url: str) -> tuple[float, list[float], int]:
    """(wall seconds, each transaction's ms, samples packed), as the storage job packs."""
    from sustain.service.db.engine import create_engine
    from sustain.service.db.sample_packing import pack_batch

    engine = create_engine(url)
    transactions: list[float] = []
    packed = 0
    try:
        t0 = time.perf_counter()
        while True:
            started = time.perf_counter()
            async with engine.begin() as connection:
                done = await pack_batch(connection, datetime.now(UTC), 500, 20_000)
            if not done:
                break
            transactions.append((time.perf_counter() - started) * 1000)
            packed += done
        return time.perf_counter() - t0, transactions, packed
    finally:
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default=SERVER_URL)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--load-samples", type=int, default=2000)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    from benchmarks.common import drop_database, fresh_database
    from sustain.service.runs.sample_block import identical

    url = fresh_database(args.server_url, DATABASE)
    try:
        t0 = time.perf_counter()
        written = asyncio.run(seed(url, args.days, args.load_samples))
        seed_s = time.perf_counter() - t0
        before = asyncio.run(sizes(url))
        as_rows = asyncio.run(everything(url))
        pack_s, transactions, packed = asyncio.run(pack(url))
        after = asyncio.run(sizes(url))
        as_blocks = asyncio.run(everything(url))
    finally:
        drop_database(args.server_url, DATABASE)

    same = identical(as_rows, as_blocks)
    held_before = sum(before.values())
    held_after = sum(after.values())
    ordered = sorted(transactions)
    body = "\n".join([
        f"{args.days:g} days of two probes' runs stored as rows ({round(args.days * 1440):,} "
        f"one-minute "
        f"single-request runs and {round(args.days * 24)} hourly runs of "
        f"{args.load_samples:,} requests: {written:,} samples, seeded in {seed_s:.0f} s), "
        f"then packed by `sample_packing.pack_batch` as the storage job does (transactions "
        f"of at most 20,000 samples).",
        "",
        "| | `samples` | `sample_blocks` | per sample |",
        "|---|---|---|---|",
        f"| before | {before['samples']:,} B | {before['sample_blocks']:,} B | "
        f"{held_before / written:,.1f} B |",
        f"| after | {after['samples']:,} B | {after['sample_blocks']:,} B | "
        f"{held_after / written:,.1f} B |",
        "",
        f"Packed {packed:,} samples in {pack_s:.1f} s ({packed / pack_s:,.0f} samples/s) in "
        f"{len(transactions)} transactions: median {ordered[len(ordered) // 2]:.0f} ms, "
        f"longest {ordered[-1]:.0f} ms. Every sample reads back the same from the blocks as "
        f"from the rows (all columns, floats bit for bit): "
        f"{'yes' if same else 'NO'}, {len(as_blocks):,} of {len(as_rows):,}.",
    ])
    headline = (f"{held_before / written:,.1f} B per sample as rows, {held_after / written:,.1f} "
                f"B packed; {packed / pack_s:,.0f} samples/s, longest transaction "
                f"{ordered[-1]:.0f} ms; lossless: {'yes' if same else 'NO'}")
    if args.no_record:
        print(body)
    else:
        record("sample packing: a week of samples stored as rows, packed into blocks",
               "python " + " ".join(sys.argv), body, headline=headline)


if __name__ == "__main__":
    main()
