"""Scheduler precision: how late the first request of each scheduled run leaves, relative to
its tick plus the tick's jitter, with 200 probes on one `sustain serve`.

For every run: delay = (sent_at of its first sample) - scheduled_for - jitter_of(probe, tick),
where jitter_of is the same per-tick jitter the replicas compute. The delay covers APScheduler
waking up and the run's start up to its first send (the tick's claim and its probe's reading
happen ahead of the tick, in batches, except a probe's first tick). Probes are `single`
requests against the simulator, every --interval seconds; two phases: jitter 0 (all 200 ticks
at the same instant, the worst burst) and --jitter seconds (the usual setting). Runs of each
probe's first tick (the catch-up run at creation) are left out.

Target: p99 <= 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import SERVER_URL, Service, Simulator, drop_database, fresh_database, record
from sustain.service.ticks.schedule import jitter_of
from tests.conftest import asyncpg_dsn

DATABASE = "sustain_bench_scheduler"
TARGET_MS = 50.0


def create_probes(api: httpx.Client, simulator_url: str, count: int, interval_s: int,
                  jitter_s: float, prefix: str) -> None:
    endpoint = api.get("/api/v1/endpoints").json()["items"]
    if endpoint:
        endpoint_id = endpoint[0]["id"]
    else:
        endpoint_id = api.post("/api/v1/endpoints", json={
            "name": "sim", "base_url": simulator_url, "model": "sim-model"}).json()["id"]
    for i in range(count):
        r = api.post("/api/v1/probes", json={
            "name": f"{prefix}{i:03d}", "endpoint_id": endpoint_id,
            "interval_s": interval_s, "jitter_s": jitter_s,
            "profile": {"kind": "single"}, "workload": {"max_tokens": 4}})
        r.raise_for_status()


def disable(api: httpx.Client, prefix: str) -> None:
    for probe in api.get("/api/v1/probes").json()["items"]:
        if probe["name"].startswith(prefix):
            api.patch(f"/api/v1/probes/{probe['id']}", json={"enabled": False})


async def delays_ms(url: str, prefix: str, after: datetime) -> list[float]:
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        rows = await connection.fetch(
            "SELECT p.id, p.jitter_seconds, r.scheduled_for, min(s.sent_at) AS first_send "
            "FROM runs r JOIN probes p ON p.id = r.probe_id JOIN samples s ON s.run_id = r.id "
            "WHERE r.trigger = 'schedule' AND p.name LIKE $1 AND r.scheduled_for > $2 "
            "GROUP BY p.id, p.jitter_seconds, r.scheduled_for", prefix + "%", after)
    finally:
        await connection.close()
    return [((row["first_send"] - row["scheduled_for"]).total_seconds()
             - jitter_of(row["id"], row["scheduled_for"], row["jitter_seconds"])) * 1000
            for row in rows]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default=SERVER_URL)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--interval", type=int, default=10)
    parser.add_argument("--jitter", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    url = fresh_database(args.server_url, DATABASE)
    results: list[tuple[str, list[float]]] = []
    try:
        with Simulator(["--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4"]) as sim, \
                Service(url) as service, \
                httpx.Client(base_url=service.base_url, timeout=30) as api:
            for jitter, prefix in ((0.0, "burst-"), (args.jitter, "jitter-")):
                create_probes(api, sim.base_url, args.probes, args.interval, jitter, prefix)
                after = datetime.now(UTC) + timedelta(seconds=args.interval)
                time.sleep(args.seconds + args.interval)
                disable(api, prefix)
                time.sleep(2)
                values = asyncio.run(delays_ms(url, prefix, after))
                print(f"jitter {jitter:g} s: {len(values)} runs, p50 "
                      f"{statistics.median(values):.1f} ms, p99 {percentile(values, 0.99):.1f} "
                      f"ms", flush=True)
                results.append((f"{args.probes} probes every {args.interval} s, jitter "
                                f"{jitter:g} s", values))
    finally:
        drop_database(args.server_url, DATABASE)

    rows = "\n".join(
        f"| {name} | {len(v)} | {statistics.median(v):.1f} | {percentile(v, 0.9):.1f} | "
        f"**{percentile(v, 0.99):.1f}** | {max(v):.1f} | {TARGET_MS / percentile(v, 0.99):.1f}x |"
        for name, v in results)
    body = (
        "Delay of each scheduled run's first request after its tick plus jitter, one "
        "`sustain serve` on PostgreSQL 15 on this machine, `single` probes against the "
        f"simulator, {args.seconds:g} s per phase, in ms:\n\n"
        "| phase | runs | p50 | p90 | p99 | max | target / p99 |\n|---|---|---|---|---|---|---|\n"
        f"{rows}\n\nTarget: p99 <= {TARGET_MS:.0f} ms."
    )
    if args.no_record:
        print(body)
    else:
        (_, burst), (_, spread) = results[0], results[-1]
        record("scheduler: tick-to-first-send precision", "python " + " ".join(sys.argv), body,
               headline=f"p99 {percentile(spread, 0.99):.1f} ms at jitter {args.jitter:g} s "
                        f"({percentile(burst, 0.99):.1f} ms in the jitter-0 burst)")


if __name__ == "__main__":
    main()
