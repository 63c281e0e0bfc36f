"""A fleet at scale: 1,000 probes over 3 replicas in 2 locations (r1 and r2 in `a`, r3 in
`b`), each probe in both locations, against the simulator, for --minutes (10).

Reports, over the measured window (the first interval, with its catch-up runs, left out):
- tick-to-send delay: the first request's sent_at minus its tick minus the tick's jitter,
  p50/p99/max, per location;
- claims per second (scheduled runs recorded, every status) and how the ticks ended;
- database CPU: the CPU seconds of every PostgreSQL process over the window (the server
  serves nothing else meanwhile), per second and per run;
- bytes written per run: WAL bytes (pg_current_wal_lsn) and database growth
  (pg_database_size) over the window, divided by the runs.

The replicas sustain serve as processes, one measurement worker each (SUSTAIN_MEASURE_WORKERS
=1); the simulator on its own process. The figures feed "How far one PostgreSQL carries"
in docs/operations.md.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import SERVER_URL, Service, Simulator, drop_database, fresh_database, record
from sustain.service.ticks.schedule import jitter_of
from tests.conftest import asyncpg_dsn
from tests.processes import TEST_ADMIN_KEY

DATABASE = "sustain_bench_fleet"
LOCATIONS = {"r1": "a", "r2": "a", "r3": "b"}
ADMIN = {"Authorization": f"Bearer {TEST_ADMIN_KEY}"}


def postgres_cpu_s() -> float:
    """CPU seconds (user + system) of every PostgreSQL process on this machine."""
    total = 0.0
    for process in psutil.process_iter(["name"]):
        try:
            if (process.info["name"] or "").startswith(("postgres", "postmaster")):
                times = process.cpu_times()
                total += times.user + times.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


TABLES = {
    "runs": "runs", "run_sketches": "run_sketches", "samples": "samples%",
    "rollups": "rollup%", "slo_run_counts": "slo_run_counts",
}
"""What grows, by table (samples: its day partitions together), indexes and TOAST included."""


async def database_figures(url: str) -> tuple[int, int, dict[str, int]]:
    """(WAL position in bytes, database size in bytes, bytes of each table of TABLES)."""
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        wal = await connection.fetchval("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')")
        size = await connection.fetchval("SELECT pg_database_size(current_database())")
        tables = {name: int(await connection.fetchval(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname LIKE $1",
            pattern)) for name, pattern in TABLES.items()}
    finally:
        await connection.close()
    return int(wal), int(size), tables


async def window_runs(url: str, start: datetime, end: datetime) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        return list(await connection.fetch(
            "SELECT r.location, r.status, r.scheduled_for, p.id AS probe_id, "
            "p.jitter_seconds, (SELECT min(s.sent_at) FROM samples s WHERE s.run_id = r.id) "
            "AS first_send FROM runs r JOIN probes p ON p.id = r.probe_id "
            "WHERE r.trigger = 'schedule' AND r.scheduled_for >= $1 AND r.scheduled_for < $2",
            start, end))
    finally:
        await connection.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def create_probes(api: httpx.Client, simulator_url: str, count: int, interval_s: int,
                  jitter_s: float) -> None:
    endpoint_id = api.post("/api/v1/endpoints", json={
        "name": "sim", "base_url": simulator_url, "model": "sim-model"}).json()["id"]
    for i in range(count):
        api.post("/api/v1/probes", json={
            "name": f"p{i:04d}", "endpoint_id": endpoint_id, "interval_s": interval_s,
            "jitter_s": jitter_s, "locations": sorted(set(LOCATIONS.values())),
            "profile": {"kind": "single"}, "workload": {"max_tokens": 4}}).raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default=SERVER_URL)
    parser.add_argument("--probes", type=int, default=1000)
    parser.add_argument("--interval", type=int, default=60)
    parser.add_argument("--jitter", type=float, default=50.0)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    url = fresh_database(args.server_url, DATABASE)
    env = {"SUSTAIN_ADMIN_KEY": TEST_ADMIN_KEY, "SUSTAIN_MEASURE_WORKERS": "1",
           "SUSTAIN_AUTO_MIGRATE": "false", "SUSTAIN_MAX_PROBES": str(args.probes + 10),
           "SUSTAIN_ALLOWED_TARGETS": "127.0.0.0/8"}
    try:
        with Simulator(["--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "4",
                        "--max-batch", "512"]) as sim, \
                Service(url, {**env, "SUSTAIN_REPLICA_ID": "r1", "SUSTAIN_LOCATION": "a"}) as r1, \
                Service(url, {**env, "SUSTAIN_REPLICA_ID": "r2", "SUSTAIN_LOCATION": "a"}), \
                Service(url, {**env, "SUSTAIN_REPLICA_ID": "r3", "SUSTAIN_LOCATION": "b"}), \
                httpx.Client(base_url=r1.base_url, timeout=60, headers=ADMIN) as api:
            began = time.monotonic()
            create_probes(api, sim.base_url, args.probes, args.interval, args.jitter)
            created_s = time.monotonic() - began
            start = datetime.now(UTC) + timedelta(seconds=args.interval)
            time.sleep(args.interval)
            cpu0, (wal0, size0, tables0), t0 = postgres_cpu_s(), \
                asyncio.run(database_figures(url)), time.monotonic()
            time.sleep(args.minutes * 60)
            cpu1, (wal1, size1, tables1), t1 = postgres_cpu_s(), \
                asyncio.run(database_figures(url)), time.monotonic()
            end = start + timedelta(seconds=t1 - t0)
            # the window's last ticks fire up to the jitter later, then run and are written
            time.sleep(args.jitter + 15)
            rows = asyncio.run(window_runs(url, start, end))
    finally:
        drop_database(args.server_url, DATABASE)

    seconds = t1 - t0
    by_location: dict[str, list[float]] = defaultdict(list)
    statuses: dict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        statuses[row["location"]][row["status"]] += 1
        if row["first_send"] is not None:
            delay = (row["first_send"] - row["scheduled_for"]).total_seconds() - jitter_of(
                row["probe_id"], row["scheduled_for"], row["jitter_seconds"])
            by_location[row["location"]].append(delay * 1000)
    runs = len(rows)
    expected = args.probes * len(set(LOCATIONS.values())) * seconds / args.interval
    delays = [d for v in by_location.values() for d in v]
    lines = [
        f"| {place} | {sum(statuses[place].values())} | {dict(statuses[place])} | "
        f"{statistics.median(v):.1f} | **{percentile(v, 0.99):.1f}** | {max(v):.1f} |"
        for place, v in sorted(by_location.items())]
    body = (
        f"{args.probes} `single` probes every {args.interval} s (jitter {args.jitter:g} s), "
        f"each in locations a and b; replicas r1 and r2 in a, r3 in b, one measurement worker "
        f"each; PostgreSQL on this machine; {seconds / 60:.1f} min measured after the first "
        f"interval (creating the probes over the API took {created_s:.0f} s).\n\n"
        "| location | scheduled runs | statuses | tick-to-send p50 ms | p99 ms | max ms |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n\n"
        f"- claims: {runs / seconds:.1f} scheduled runs/s recorded ({runs} of "
        f"{expected:.0f} ticks due; all locations: p99 tick-to-send "
        f"{percentile(delays, 0.99):.1f} ms)\n"
        f"- database CPU: {(cpu1 - cpu0) / seconds:.3f} cores on average "
        f"({(cpu1 - cpu0) / max(runs, 1) * 1000:.2f} ms per run)\n"
        f"- bytes written per run: {(wal1 - wal0) / max(runs, 1) / 1024:.1f} KiB of WAL, "
        f"{(size1 - size0) / max(runs, 1) / 1024:.1f} KiB of database growth "
        f"({(size1 - size0) / 2**20:.1f} MiB over the window); by table, KiB per run: "
        + ", ".join(f"{name} {(tables1[name] - tables0[name]) / max(runs, 1) / 1024:.2f}"
                    for name in TABLES) + "\n")
    if args.no_record:
        print(body)
    else:
        record("fleet: 1,000 probes, 3 replicas, 2 locations", "python " + " ".join(sys.argv),
               body, headline=f"tick-to-send p99 {percentile(delays, 0.99):.1f} ms, "
                              f"{runs / seconds:.1f} runs/s, DB CPU "
                              f"{(cpu1 - cpu0) / max(runs, 1) * 1000:.2f} ms per run")


if __name__ == "__main__":
    main()
