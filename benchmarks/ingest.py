"""Ingest: how many samples per second the write path moves from the buffer into PostgreSQL,
while real probes run against the simulator on the same machine and database.

Two phases, in one process with the service's own SampleBuffer and SampleWriter (the code
`sustain serve` runs), on a fresh database of the machine's PostgreSQL:

1. drain: the buffer is filled with N samples (runs of --run-samples each, each followed by its
   final record with sketches and rollups, as the executor buffers them), then the writer is
   started and timed until everything is durable. Memory: RSS before and after filling, as
   bytes per buffered sample, against the buffer's capacity.
2. steady: samples are offered at --rate per second for --seconds while the writer runs; the
   buffer's largest occupancy shows whether the writer keeps up (bounded) or falls behind.

Meanwhile a separate `sustain serve` process runs --probes probes against the simulator on the
same database, so the writer competes with live probes for CPU and Postgres.

Target: >= 20,000 samples/s, memory bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psutil
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import SERVER_URL, Service, Simulator, drop_database, fresh_database, record
from sustain.probes.measure.sample import Sample
from sustain.service.db.engine import create_engine
from sustain.service.ingest.buffer import SampleBuffer
from sustain.service.ingest.writer import SampleWriter
from tests.integration.service.storage import create_run, final_of, synthetic_samples

DATABASE = "sustain_bench_ingest"
TARGET = 20_000


def create_live_probes(api: httpx.Client, simulator_url: str, probes: int, rate: float) -> int:
    """Probes the serve process runs every 5 s for 4 s at `rate` req/s each; the bulk probe's
    id (disabled, owner of the synthetic runs)."""
    endpoint = api.post("/api/v1/endpoints", json={
        "name": "sim", "base_url": simulator_url, "model": "sim-model"}).json()
    for i in range(probes):
        r = api.post("/api/v1/probes", json={
            "name": f"live-{i}", "endpoint_id": endpoint["id"], "interval_s": 5,
            "profile": {"kind": "constant", "rate": rate, "duration_s": 4},
            "workload": {"max_tokens": 16}})
        r.raise_for_status()
    bulk = api.post("/api/v1/probes", json={
        "name": "bulk", "endpoint_id": endpoint["id"], "interval_s": 3600,
        "enabled": False, "profile": {"kind": "single"}, "workload": {"max_tokens": 16}})
    bulk.raise_for_status()
    return int(bulk.json()["id"])


class Producer:
    """Buffers synthetic runs like the executor does: samples, then the run's final record."""

    def __init__(self, engine: object, buffer: SampleBuffer, probe_id: int,
                 template: list[Sample]) -> None:
        self.engine = engine
        self.buffer = buffer
        self.probe_id = probe_id
        self.template = template
        self.final_template = final_of(0, probe_id, datetime.now(UTC), template)

    async def runs(self, count: int) -> list[int]:
        return [await create_run(self.engine, self.probe_id, datetime.now(UTC))  # type: ignore[arg-type]
                for _ in range(count)]

    def put_run(self, run_id: int, samples: list[Sample] | None = None) -> None:
        sink = self.buffer.open(run_id, self.probe_id)
        for sample in samples or self.template:
            sink.put(sample)
        sink.finish(replace(self.final_template, run_id=run_id))


async def drain_phase(url: str, probe_id: int, samples: int, run_samples: int,
                      capacity: int) -> dict[str, float]:
    engine = create_engine(url)
    buffer = SampleBuffer(capacity)
    template = synthetic_samples(run_samples, datetime.now(UTC), random.Random(1), fail_every=50)
    producer = Producer(engine, buffer, probe_id, template)
    run_ids = await producer.runs(samples // run_samples)
    gc.collect()
    rss0 = psutil.Process().memory_info().rss
    rng = random.Random(3)
    for run_id in run_ids:
        producer.put_run(run_id, synthetic_samples(run_samples, datetime.now(UTC), rng,
                                                   fail_every=50))
    gc.collect()
    rss1 = psutil.Process().memory_info().rss
    buffered = buffer.samples
    writer = SampleWriter(engine, buffer)
    t0 = time.perf_counter()
    writer.start()
    assert await writer.flush(900), "drain did not finish in 15 minutes"
    elapsed = time.perf_counter() - t0
    await writer.close(1)
    await engine.dispose()
    return {"samples": buffered, "seconds": elapsed, "rate": buffered / elapsed,
            "bytes_per_sample": (rss1 - rss0) / buffered, "dropped": buffer.dropped_total,
            "written": writer.written_total, "failures": writer.failures_total}


async def steady_phase(url: str, probe_id: int, rate: int, seconds: float, run_samples: int,
                       capacity: int) -> dict[str, float]:
    engine = create_engine(url)
    buffer = SampleBuffer(capacity)
    template = synthetic_samples(run_samples, datetime.now(UTC), random.Random(2), fail_every=50)
    producer = Producer(engine, buffer, probe_id, template)
    total_runs = int(rate * seconds) // run_samples
    run_ids = await producer.runs(total_runs)
    writer = SampleWriter(engine, buffer)
    writer.start()
    occupancy: list[int] = []
    t0 = time.perf_counter()
    for i, run_id in enumerate(run_ids):
        due = t0 + (i + 1) * run_samples / rate
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        producer.put_run(run_id)
        occupancy.append(buffer.samples)
    offered_s = time.perf_counter() - t0
    assert await writer.flush(600)
    drained_s = time.perf_counter() - t0
    await writer.close(1)
    await engine.dispose()
    written = writer.written_total
    return {"offered_rate": written / offered_s, "written_rate": written / drained_s,
            "tail_s": drained_s - offered_s, "max_buffered": max(occupancy),
            "median_buffered": statistics.median(occupancy), "dropped": buffer.dropped_total}


def live_probe_figures(url: str, since: datetime) -> tuple[int, int, int]:
    async def query() -> tuple[int, int, int]:
        engine = create_engine(url)
        from sqlalchemy import text
        try:
            async with engine.connect() as connection:
                row = (await connection.execute(text(
                    "SELECT count(*) FILTER (WHERE r.status = 'succeeded'), "
                    "count(*) FILTER (WHERE r.status NOT IN ('pending', 'running')), "
                    "coalesce(sum(r.attempts), 0) FROM runs r JOIN probes p "
                    "ON p.id = r.probe_id WHERE p.name LIKE 'live-%' AND r.scheduled_for >= :s"),
                    {"s": since})).one()
                return int(row[0]), int(row[1]), int(row[2])
        finally:
            await engine.dispose()
    return asyncio.run(query())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default=SERVER_URL)
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--run-samples", type=int, default=10_000)
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=25_000, help="steady phase, samples/s")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--probes", type=int, default=4)
    parser.add_argument("--probe-rate", type=float, default=20.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    url = fresh_database(args.server_url, DATABASE)
    try:
        with Simulator(["--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "16"]) as sim, \
                Service(url) as service, httpx.Client(base_url=service.base_url) as api:
            probe_id = create_live_probes(api, sim.base_url, args.probes, args.probe_rate)
            since = datetime.now(UTC)
            drain = uvloop.run(drain_phase(url, probe_id, args.samples, args.run_samples,
                                           args.capacity))
            print(f"drain: {drain}")
            steady = uvloop.run(steady_phase(url, probe_id, args.rate, args.seconds,
                                             args.run_samples, args.capacity))
            print(f"steady: {steady}")
            succeeded, live_runs, live_samples = live_probe_figures(url, since)
    finally:
        drop_database(args.server_url, DATABASE)

    body = (
        f"Write path (SampleBuffer -> SampleWriter -> PostgreSQL 15 on this machine), "
        f"while {args.probes} probes at {args.probe_rate:g} req/s ran in a `sustain serve` "
        f"on the same database ({succeeded} of their {live_runs} finished runs succeeded, "
        f"{live_samples} samples).\n\n"
        f"| phase | samples | figure |\n|---|---|---|\n"
        f"| drain a full buffer | {drain['samples']:,.0f} | **{drain['rate']:,.0f} samples/s** "
        f"({drain['seconds']:.1f} s) |\n"
        f"| steady offer at {args.rate:,}/s for {args.seconds:g} s | "
        f"{steady['offered_rate'] * args.seconds:,.0f} | written {steady['written_rate']:,.0f}"
        f" samples/s; buffer max {steady['max_buffered']:,.0f}, median "
        f"{steady['median_buffered']:,.0f}; drained {steady['tail_s']:.2f} s after the "
        f"offer ended |\n\n"
        f"Memory: {drain['bytes_per_sample']:.0f} bytes of RSS per buffered sample, so the "
        f"default capacity of 1,000,000 samples bounds the buffer at about "
        f"{drain['bytes_per_sample'] * 1e6 / 2**20:,.0f} MiB. Dropped: "
        f"{drain['dropped'] + steady['dropped']:.0f}; write failures: {drain['failures']:.0f}."
        f"\n\nTarget: >= {TARGET:,} samples/s, memory bounded. Ratio to target (drain): "
        f"{drain['rate'] / TARGET:.2f}x."
    )
    if args.no_record:
        print(body)
    else:
        record("ingest: buffered samples into PostgreSQL", "python " + " ".join(sys.argv),
               body, headline=f"drain {drain['rate']:,.0f} samples/s, "
                              f"{drain['bytes_per_sample']:.0f} B RSS per buffered sample")


if __name__ == "__main__":
    main()
