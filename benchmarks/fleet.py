"""A fleet at scale: 1,000 probes over 2 replicas in each of 2 locations (r1 and r2 in `a`, r3
and r4 in `b`; --replicas-per-location), each probe in both locations, against the simulator,
for --minutes (10).

With --baseline REV (the commit before a change, or HEAD before it is committed), location b's
replicas run that revision's code (its tree from `git archive`, first on their PYTHONPATH)
while location a's run this working tree: both ways of scheduling run the same 1,000 probes at
the same moment on the same database and the same busy machine, and the ratio of their
tick-to-send p99 is the change's effect. Without it, every replica runs this working tree.
REV must use this tree's schema (the database is migrated by this tree): from revision 0026
on, whose runs keep their sketches as a record on the run's row.

Reports, over the measured window (the first interval, with its catch-up runs, left out):
- tick-to-send delay: the first request's sent_at minus its tick minus the tick's jitter,
  p50/p99/max, per location (so per code, with --baseline);
- claims per second (scheduled runs recorded, every status) and how the ticks ended;
- database CPU: the CPU seconds of every PostgreSQL process over the window (the server
  serves nothing else meanwhile), per second and per run;
- bytes written per run: WAL bytes (pg_current_wal_lsn) and database growth
  (pg_database_size) over the window, divided by the runs.

The replicas sustain serve as processes, one measurement worker each (SUSTAIN_MEASURE_WORKERS
=1); the simulator on its own process. The figures feed "How far one PostgreSQL carries"
and "Schedules, replicas and shutdown" in docs/operations.md.

Target: tick-to-send p99 <= 50 ms in every location running this tree.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter, defaultdict
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (
    SERVER_URL,
    Service,
    Simulator,
    drop_database,
    free_port,
    fresh_database,
    record,
)
from sustain.service.ticks.schedule import jitter_of
from tests.conftest import asyncpg_dsn
from tests.processes import TEST_ADMIN_KEY

DATABASE = "sustain_bench_fleet"
PLACES = ("a", "b")
BASELINE_PLACE = "b"
"""The location whose replicas run the --baseline revision."""
ADMIN = {"Authorization": f"Bearer {TEST_ADMIN_KEY}"}
TARGET_MS = 50.0
RECONCILE_S = 30.0
"""The replicas' SUSTAIN_RECONCILE_S (the default): how soon each reads the copied probes."""
MISSED_AFTER_S = 15 + 5 + RECONCILE_S + 10
"""After its firing, by when a tick nobody ran is recorded missed: the misfire grace (15 s),
the reconcile's margin (5 s), a reconcile interval and some slack."""
ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"probes": "probes", "service": "service", "simulator": "simulator",
            "migrations": "migrations"}
"""Where each subpackage of `sustain` lives in the repository (pyproject's package-dir)."""


def baseline_path(rev: str, into: Path) -> Path:
    """A directory holding revision `rev`'s `sustain` package (its tree from `git archive`,
    laid out as pyproject's package-dir maps it): put first on PYTHONPATH, a process
    imports that revision's code instead of the installed working tree's."""
    archive = into / "tree.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), rev],
                   check=True)
    tree = into / "tree"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    package = into / "path" / "sustain"
    shutil.copytree(tree / "src" / "sustain", package)
    for name, folder in PACKAGES.items():
        shutil.copytree(tree / folder, package / name)
    return into / "path"


def replicas_of(per_location: int) -> dict[str, str]:
    """Replica name -> location: r1.. in a, then the same number in b."""
    return {f"r{i * per_location + j + 1}": place
            for i, place in enumerate(PLACES) for j in range(per_location)}


def postgres_cpu_s() -> float:
    """CPU seconds (user + system) of the PostgreSQL processes that serve this benchmark: the
    backends of its database and the server's own background processes (not the backends of
    other databases, which a shared machine may run meanwhile). A backend that exits takes
    its CPU time with it: the replicas' pooled connections live through the window."""
    total = 0.0
    for process in psutil.process_iter(["name", "cmdline"]):
        try:
            if not (process.info["name"] or "").startswith(("postgres", "postmaster")):
                continue
            title = " ".join(process.info["cmdline"] or [])
            if f" {DATABASE} " in title or "(" not in title:  # ours, or a background one
                times = process.cpu_times()
                total += times.user + times.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


TABLES = {
    "runs": "runs", "samples": "samples%",
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
            "SELECT r.location, r.status, r.claimed_by, r.scheduled_for, p.id AS probe_id, "
            "p.jitter_seconds, (SELECT min(s.sent_at) FROM samples s WHERE s.run_id = r.id) "
            "AS first_send FROM runs r JOIN probes p ON p.id = r.probe_id "
            "WHERE r.trigger = 'schedule' AND r.scheduled_for >= $1 AND r.scheduled_for < $2",
            start, end))
    finally:
        await connection.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def create_probes(api: httpx.Client, url: str, simulator_url: str, count: int,
                  interval_s: int, jitter_s: float) -> None:
    """The first probe over the API, then `count - 1` copies of its row in one INSERT (so
    every probe is stored as the API stores it, without 1,000 API round trips on a busy
    machine); the replicas pick the copies up at their next reconcile."""
    endpoint_id = api.post("/api/v1/endpoints", json={
        "name": "sim", "base_url": simulator_url, "model": "sim-model"}).json()["id"]
    first = api.post("/api/v1/probes", json={
        "name": "p0000", "endpoint_id": endpoint_id, "interval_s": interval_s,
        "jitter_s": jitter_s, "locations": list(PLACES),
        "profile": {"kind": "single"}, "workload": {"max_tokens": 4}})
    first.raise_for_status()
    asyncio.run(copy_probe(url, int(first.json()["id"]), count - 1))


async def copy_probe(url: str, probe_id: int, copies: int) -> None:
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        columns = [r["column_name"] for r in await connection.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'probes' "
            "AND column_name NOT IN ('id', 'name', 'created_at', 'updated_at', "
            "'schedule_since', 'ticks_checked_until')")]
        listed = ", ".join(f'"{c}"' for c in columns)
        await connection.execute(
            f"INSERT INTO probes (name, {listed}) SELECT 'p' || lpad(i::text, 4, '0'), "
            f"{listed} FROM probes, generate_series(1, $2) AS i WHERE id = $1",
            probe_id, copies)
    finally:
        await connection.close()


class LoggedService(Service):
    """`sustain serve` as Service starts it, its output kept in `log` (--logs)."""

    def __init__(self, url: str, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "sustain", "serve", "--port", str(self.port),
                 "--log-level", "info"],
                env={**os.environ, "SUSTAIN_DATABASE_URL": url, **env},
                stdout=out, stderr=subprocess.STDOUT)
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.wait_ready(f"{self.base_url}/readyz", 120, "sustain serve")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default=SERVER_URL)
    parser.add_argument("--probes", type=int, default=1000)
    parser.add_argument("--interval", type=int, default=60)
    parser.add_argument("--jitter", type=float, default=50.0)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--replicas-per-location", type=int, default=2)
    parser.add_argument("--baseline", metavar="REV", default=None,
                        help="run location b's replicas from this git revision")
    parser.add_argument("--baseline-everywhere", action="store_true",
                        help="run every replica from --baseline (the old code alone; with "
                        "--no-record)")
    parser.add_argument("--logs", type=Path, default=None,
                        help="keep each replica's log (level info) in this folder")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    if args.baseline_everywhere and (args.baseline is None or not args.no_record):
        parser.error("--baseline-everywhere needs --baseline and --no-record")
    baseline_places = set(PLACES) if args.baseline_everywhere else {BASELINE_PLACE}

    url = fresh_database(args.server_url, DATABASE)
    env = {"SUSTAIN_ADMIN_KEY": TEST_ADMIN_KEY, "SUSTAIN_MEASURE_WORKERS": "1",
           "SUSTAIN_AUTO_MIGRATE": "false", "SUSTAIN_MAX_PROBES": str(args.probes + 10),
           "SUSTAIN_ALLOWED_TARGETS": "127.0.0.0/8", "SUSTAIN_RECONCILE_S": str(RECONCILE_S)}
    replicas = replicas_of(args.replicas_per_location)
    code = {place: "this tree" for place in PLACES}
    try:
        with ExitStack() as stack:
            baseline_env: dict[str, str] = {}
            if args.baseline is not None:
                path = baseline_path(args.baseline, Path(stack.enter_context(
                    tempfile.TemporaryDirectory(prefix="sustain-baseline-"))))
                baseline_env = {"PYTHONPATH": os.pathsep.join(
                    [str(path), *filter(None, [os.environ.get("PYTHONPATH")])])}
                short = subprocess.run(
                    ["git", "-C", str(ROOT), "rev-parse", "--short", args.baseline],
                    check=True, capture_output=True, text=True).stdout.strip()
                code.update((place, f"baseline {short}") for place in baseline_places)
            sim = stack.enter_context(Simulator(["--ttft-ms", "5", "--itl-ms", "1",
                                                 "--output-tokens", "4", "--max-batch", "512"]))
            services: dict[str, Service] = {}
            for name, place in replicas.items():
                replica_env = {**env, "SUSTAIN_REPLICA_ID": name, "SUSTAIN_LOCATION": place,
                               **(baseline_env if place in baseline_places else {})}
                services[place] = stack.enter_context(
                    Service(url, replica_env) if args.logs is None else
                    LoggedService(url, replica_env, args.logs / f"{name}.log"))
            # through the baseline's API where there is one: its rows are what both read
            api = stack.enter_context(httpx.Client(
                base_url=services[BASELINE_PLACE if args.baseline else PLACES[0]].base_url,
                timeout=60, headers=ADMIN))
            began = time.monotonic()
            create_probes(api, url, sim.base_url, args.probes, args.interval, args.jitter)
            created_s = time.monotonic() - began
            # every replica reads the copies within a reconcile, then runs their current
            # tick at once (a catch-up run): the window starts an interval after that
            settle_s = RECONCILE_S + args.interval
            start = datetime.now(UTC) + timedelta(seconds=settle_s)
            time.sleep(settle_s)
            load0 = os.getloadavg()
            cpu0, (wal0, size0, tables0), t0 = postgres_cpu_s(), \
                asyncio.run(database_figures(url)), time.monotonic()
            time.sleep(args.minutes * 60)
            load1 = os.getloadavg()
            cpu1, (wal1, size1, tables1), t1 = postgres_cpu_s(), \
                asyncio.run(database_figures(url)), time.monotonic()
            end = start + timedelta(seconds=t1 - t0)
            # the window's last ticks fire up to the jitter later, then run and are written,
            # or are recorded missed by a reconcile once past their grace
            time.sleep(args.jitter + MISSED_AFTER_S)
            rows = asyncio.run(window_runs(url, start, end))
    finally:
        drop_database(args.server_url, DATABASE)

    seconds = t1 - t0
    by_location: dict[str, list[float]] = defaultdict(list)
    by_replica: dict[str, list[float]] = defaultdict(list)
    statuses: dict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        statuses[row["location"]][row["status"]] += 1
        if row["first_send"] is not None:
            delay = (row["first_send"] - row["scheduled_for"]).total_seconds() - jitter_of(
                row["probe_id"], row["scheduled_for"], row["jitter_seconds"])
            by_location[row["location"]].append(delay * 1000)
            by_replica[row["claimed_by"]].append(delay * 1000)
    runs = len(rows)
    expected = args.probes * len(PLACES) * (math.ceil(end.timestamp() / args.interval)
                                            - math.ceil(start.timestamp() / args.interval))
    ours = [d for place, v in by_location.items() if code[place] == "this tree" for d in v] \
        or [d for v in by_location.values() for d in v]
    lines = [
        f"| {place} | {code[place]} | {', '.join(n for n, p in replicas.items() if p == place)}"
        f" | {sum(statuses[place].values())} | {dict(statuses[place])} | "
        f"{statistics.median(v):.1f} | **{percentile(v, 0.99):.1f}** | {max(v):.1f} |"
        for place, v in sorted(by_location.items())]
    ratio = None
    if args.baseline is not None and not args.baseline_everywhere and by_location[BASELINE_PLACE]:
        before = percentile(by_location[BASELINE_PLACE], 0.99)
        ratio = (f"{code[BASELINE_PLACE]} (location {BASELINE_PLACE}, same run): p99 "
                 f"{before:.1f} ms, {before / percentile(ours, 0.99):.1f}x this tree's")
    body = (
        f"{args.probes} `single` probes every {args.interval} s (jitter {args.jitter:g} s), "
        f"each in locations a and b; {args.replicas_per_location} replicas in each, one "
        f"measurement worker each; PostgreSQL on this machine; {seconds / 60:.1f} min measured "
        f"from {RECONCILE_S + args.interval:.0f} s after the probes were created (one over "
        f"the API, the others copies of its row, in {created_s:.0f} s), when every replica "
        "has read them and run their catch-up ticks. Load average (1, 5, 15 min; the "
        "machine's other work included) as the window began: "
        + ", ".join(f"{x:.1f}" for x in load0) + "; as it ended: "
        + ", ".join(f"{x:.1f}" for x in load1) + ".\n\n"
        "| location | code | replicas | scheduled runs | statuses | tick-to-send p50 ms | "
        "p99 ms | max ms |\n|---|---|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n\n"
        f"- claims: {runs / seconds:.1f} scheduled runs/s recorded ({runs} of "
        f"{expected} ticks due)\n"
        "- tick-to-send by replica (runs, p50 ms, p99 ms): " + ", ".join(
            f"{name} {len(v)}, {statistics.median(v):.1f}, {percentile(v, 0.99):.1f}"
            for name, v in sorted(by_replica.items())) + "\n"
        f"- database CPU: {(cpu1 - cpu0) / seconds:.3f} cores on average "
        f"({(cpu1 - cpu0) / max(runs, 1) * 1000:.2f} ms per run: the backends of this "
        "database and the server's background processes)\n"
        f"- bytes written per run: {(wal1 - wal0) / max(runs, 1) / 1024:.1f} KiB of WAL, "
        f"{(size1 - size0) / max(runs, 1) / 1024:.1f} KiB of database growth "
        f"({(size1 - size0) / 2**20:.1f} MiB over the window); by table, KiB per run: "
        + ", ".join(f"{name} {(tables1[name] - tables0[name]) / max(runs, 1) / 1024:.2f}"
                    for name in TABLES) + "\n\n"
        f"Target: tick-to-send p99 <= {TARGET_MS:.0f} ms in every location running this tree.")
    if args.no_record:
        print(body)
        if ratio:
            print(ratio)
    else:
        record("fleet: 1,000 probes, 2 replicas in each of 2 locations",
               "python " + " ".join(sys.argv), body,
               headline=f"tick-to-send p99 {percentile(ours, 0.99):.1f} ms, "
                        f"{runs / seconds:.1f} runs/s, DB CPU "
                        f"{(cpu1 - cpu0) / max(runs, 1) * 1000:.2f} ms per run",
               ratio=ratio)


if __name__ == "__main__":
    main()
