"""Storage: the bytes sustain's PostgreSQL keeps per run and per raw sample, by table, on a
fresh database migrated to head.

Runs are measured for real against the simulator (in its own process on core 1, TTFT 40 ms
and ITL 8 ms, each with lognormal jitter of sigma 0.3, 64 tokens a reply) by the probes'
runner, as the service's executor measures a tick (probe, endpoint, workload, profile and
SLO read back from the database; `completed()` builds the final record, sketches included,
in a thread), and stored through the service's own `OfflineRuns` (scheduling/offline.py): the
unique claim of the tick (`runs.claim_measured`), then `ingest.store.store_run`, the path
every whole finished run takes: its sample rows, then its final record (status, summary,
counts, sketches, hourly and daily rollups: `db.results.apply_all`; SLO counts). A live tick
writes the same rows (claimed ahead, samples through the write buffer, the same final step).

1. Per run: --runs (1,440: one full UTC day) single-request streamed chat runs of one probe,
   one per minute of scheduled time, so the probe's 24 hourly rollup buckets and its daily one
   fill as they do in a day of a one-minute probe; one availability SLO covers the probe. The
   growth of each table is then measured twice: after a plain `VACUUM (ANALYZE)` (what the
   disk holds while autovacuum keeps up: dead row versions of the runs' status updates and of
   the rollups' merges are free space to reuse, not returned) and after `VACUUM (FULL,
   ANALYZE)` (every table and index rewritten compactly: the long-run rate of growth, the
   headline). Bytes per run = growth / runs, by table.
2. Per sample: one run of a --rate (200) req/s constant streamed chat probe for --seconds
   (40): about 8,000 samples; bytes per sample = the growth of the raw samples (`samples`
   rows and `sample_blocks`, every daily partition summed, their indexes included) after
   `VACUUM (FULL, ANALYZE)`, over the samples stored, once the storage job has packed the
   run (`db.sample_packing.pack_finished`, as it does SUSTAIN_SAMPLE_PACK_AFTER_S after a run
   finishes); the figure as rows, before packing, is reported beside it.

Both phases pack the runs they stored before measuring: the steady state of a history is
packed samples, a recent hour's runs are rows.

Sizes are `pg_total_relation_size` (heap, TOAST and indexes; the free-space and visibility
maps too after a plain VACUUM), grouped as runs (a run's sketches are a record on its row),
rollups, rollup_sketches, samples (partitions summed) and others (every other table, e.g.
slo_run_counts). The figures feed docs/sizing.md; `--sizing` prints its table of fleets from them.

Targets: <= 2 KiB per single-request run, <= 50 B per sample.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import SERVER_URL, record
from benchmarks.sizing import Footprint, human, sizing_table

DATABASE = "sustain_bench_storage"
TARGET_RUN_BYTES = 2048
"""Target: bytes kept per single-request run, every table included."""
TARGET_SAMPLE_BYTES = 50
"""Target: bytes kept per raw sample (its `samples` row and index entries)."""
GROUPS = ("runs", "rollups", "rollup_sketches", "samples")
"""The tables reported on their own; every other table counts as OTHERS."""
OTHERS = "others"
SIMULATOR_ARGS = ["--ttft-ms", "40", "--ttft-sigma", "0.3", "--itl-ms", "8",
                  "--itl-sigma", "0.3", "--output-tokens", "64"]


# --- pure: tables to groups ----------------------------------------------------------------

PACKED_SAMPLES = "sample_blocks"
"""Raw samples packed (db.sample_blocks): counted in the `samples` group with the rows."""


def group_of(table: str, parent: str | None = None) -> str:
    """The group a table's bytes count in: a partition counts as its parent (samples'
    daily partitions as `samples`), packed samples as `samples`, any table outside GROUPS
    as OTHERS."""
    name = parent or table
    if name == PACKED_SAMPLES:
        return "samples"
    return name if name in GROUPS else OTHERS


def by_table(relations: Iterable[tuple[str, str | None, int]]) -> dict[str, int]:
    """Bytes per table from (table, partitioned parent or None, bytes): partitions summed
    under their parent."""
    sizes: dict[str, int] = {}
    for table, parent, size in relations:
        name = parent or table
        sizes[name] = sizes.get(name, 0) + size
    return sizes


def by_group(tables: Mapping[str, int]) -> dict[str, int]:
    """Bytes per group (GROUPS, then OTHERS), from bytes per table."""
    groups = dict.fromkeys((*GROUPS, OTHERS), 0)
    for table, size in tables.items():
        groups[group_of(table)] += size
    return groups


def growth(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """Bytes each table (or group) grew by from `before` to `after`; one missing counts 0."""
    return {name: after.get(name, 0) - before.get(name, 0)
            for name in dict.fromkeys([*before, *after])}


# --- the measurement ------------------------------------------------------------------------

SIZES = """
    SELECT c.relname AS name, p.relname AS parent, pg_total_relation_size(c.oid) AS bytes
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
    LEFT JOIN pg_class p ON p.oid = i.inhparent
    WHERE n.nspname = 'public' AND c.relkind = 'r'
"""
COUNTED = ("runs", "rollups", "rollup_sketches", "samples", "slo_run_counts")
PACK_LATER = timedelta(days=2)
"""The packing cutoff's distance ahead of now: every stored run has finished before it."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Bytes per table and rows per COUNTED table at one moment."""

    tables: dict[str, int]
    rows: dict[str, int]


async def snapshot(url: str, vacuum: str) -> Snapshot:
    """`VACUUM (<vacuum>)` the whole database, then read each table's size and row count."""
    import asyncpg

    from tests.conftest import asyncpg_dsn

    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await connection.execute(f"VACUUM ({vacuum})")
        tables = by_table((r["name"], r["parent"], int(r["bytes"]))
                          for r in await connection.fetch(SIZES))
        rows = {name: int(await connection.fetchval(f"SELECT count(*) FROM {name}"))
                for name in COUNTED}
        rows["packed"] = int(await connection.fetchval(
            "SELECT coalesce(sum(samples), 0) FROM sample_blocks"))
        rows["blocks"] = int(await connection.fetchval("SELECT count(*) FROM sample_blocks"))
        for width, count in await connection.fetch(
                "SELECT width_s, count(*) FROM rollups GROUP BY width_s"):
            rows[f"rollups/{width}"] = int(count)
    finally:
        await connection.close()
    return Snapshot(tables, rows)


RUN_COLUMNS = """
    SELECT avg(pg_column_size(summary)) AS summary, avg(octet_length(summary_record)) AS record,
           avg(octet_length(sketches)) AS sketches
    FROM runs WHERE probe_id = $1
"""


async def run_columns(url: str, probe_id: int) -> dict[str, float]:
    """A probe's runs' stored columns, average bytes each as stored (a JSONB column's size
    compressed where PostgreSQL compressed it): `summary` (the SQL keys' JSONB), `record` (the
    whole summary's record), `sketches` (the sketch record)."""
    import asyncpg

    from tests.conftest import asyncpg_dsn

    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        row = await connection.fetchrow(RUN_COLUMNS, probe_id)
    finally:
        await connection.close()
    return {key: float(row[key] or 0) for key in ("summary", "record", "sketches")}


async def create_probes(url: str, simulator_url: str, rate: float, seconds: float
                        ) -> tuple[int, int]:
    """The endpoint, the single-request probe with its SLO and the load probe, created as the
    API creates them; (single probe id, load probe id)."""
    from sustain.service.db import crud
    from sustain.service.db import endpoints as endpoint_queries
    from sustain.service.db import probes as probe_queries
    from sustain.service.db import slos as slo_queries
    from sustain.service.db.engine import create_engine, session_factory
    from sustain.service.db.models import Endpoint, Probe, Slo
    from sustain.service.schemas.endpoints import EndpointCreate
    from sustain.service.schemas.probes import ProbeCreate
    from sustain.service.schemas.slos import SloCreate

    engine = create_engine(url)
    try:
        async with session_factory(engine).begin() as session:
            endpoint = await crud.create(session, Endpoint, endpoint_queries.columns(
                EndpointCreate.model_validate({"name": "sim", "base_url": simulator_url,
                                               "model": "sim-model"})), "endpoint")
            single = await crud.create(session, Probe, probe_queries.columns(
                ProbeCreate.model_validate({
                    "name": "heartbeat", "endpoint_id": endpoint.id, "interval_s": 60,
                    "profile": {"kind": "single"}, "workload": {"max_tokens": 64}})), "probe")
            load = await crud.create(session, Probe, probe_queries.columns(
                ProbeCreate.model_validate({
                    "name": "load", "endpoint_id": endpoint.id, "interval_s": 3600,
                    "profile": {"kind": "constant", "rate": rate, "duration_s": seconds},
                    "workload": {"max_tokens": 64}})), "probe")
            await crud.create(session, Slo, slo_queries.columns(SloCreate.model_validate({
                "name": "heartbeat-availability", "probes": ["heartbeat"],
                "sli": {"kind": "availability"}, "objective": 0.995})), "slo")
            return int(single.id), int(load.id)
    finally:
        await engine.dispose()


@dataclass(frozen=True, slots=True)
class Stored:
    """What one phase measured and stored."""

    runs: int
    samples: int
    measure_s: float
    store_s: float
    """Wall time of storing every run (claim, samples, final record), one transaction each."""
    succeeded: int


async def measure_and_store(url: str, probe_id: int, ticks: Sequence[datetime],
                            concurrency: int) -> Stored:
    """Measure one run of the probe per tick (up to `concurrency` at once) as the executor
    does, hold them in OfflineRuns, then store them all through its store()."""
    from sqlalchemy import text

    from sustain.probes.client.clients import HttpClients
    from sustain.probes.load.profiles import parse_profile
    from sustain.probes.runner import InProcess
    from sustain.probes.workload.spec import Workload
    from sustain.service.db import probes as probe_queries
    from sustain.service.db.engine import create_engine, session_factory
    from sustain.service.runs.finals import RunFinal, completed
    from sustain.service.scheduling.offline import OfflineRuns
    from sustain.service.scheduling.targets import probe_target, slo_of

    engine = create_engine(url)
    sessions = session_factory(engine)
    try:
        async with sessions() as session:
            probe, endpoint = await probe_queries.get_with_endpoint(session, probe_id)
        offline = OfflineRuns(capacity=1_000_000, replica_id="bench-storage")
        gate = asyncio.Semaphore(concurrency)

        async def one(measurer: InProcess, tick: datetime) -> None:
            async with gate:
                sink = offline.open(probe.id, tick, datetime.now(UTC))
                base = RunFinal(run_id=0, probe_id=probe.id, scheduled_for=tick,
                                status="failed")
                result = await measurer.measure(
                    probe_target(endpoint), Workload.model_validate(probe.workload),
                    parse_profile(probe.profile), slo_of(probe), on_sample=sink.put)
                sink.finish(await asyncio.to_thread(completed, base, result))

        t0 = time.perf_counter()
        async with HttpClients() as clients:
            measurer = InProcess(clients)
            await asyncio.gather(*(one(measurer, tick) for tick in ticks))
        measured_s = time.perf_counter() - t0
        samples = offline.samples
        t0 = time.perf_counter()
        stored = await offline.store(sessions)
        store_s = time.perf_counter() - t0
        if stored != len(ticks) or offline.duplicates:
            raise RuntimeError(f"stored {stored} of {len(ticks)} runs, "
                               f"{offline.duplicates} as duplicates")
        async with engine.connect() as connection:
            succeeded = int((await connection.execute(text(
                "SELECT count(*) FROM runs WHERE probe_id = :p AND status = 'succeeded'"),
                {"p": probe_id})).scalar_one())
        return Stored(len(ticks), samples, measured_s, store_s, succeeded)
    finally:
        await engine.dispose()


async def pack(url: str) -> float:
    """The storage job's packing of every stored run's rows into blocks (as it runs once a
    run is SUSTAIN_SAMPLE_PACK_AFTER_S old); seconds it took."""
    from sustain.service.db.engine import create_engine
    from sustain.service.db.sample_packing import pack_finished

    engine = create_engine(url)
    try:
        t0 = time.perf_counter()
        await pack_finished(engine, datetime.now(UTC) + PACK_LATER)
        return time.perf_counter() - t0
    finally:
        await engine.dispose()


def per(grown: Mapping[str, int], count: float) -> dict[str, float]:
    """Bytes of growth per run (or sample), by table or group."""
    return {name: size / count for name, size in grown.items()}


def ratio(figure: float, target: float) -> str:
    """A figure over its target, as `7.72x` (above 1: over the target)."""
    return f"{figure / target:.2f}x"


def table_rows(per_full: Mapping[str, float], per_plain: Mapping[str, float],
               rows_full: Mapping[str, int], runs: int) -> list[str]:
    lines = []
    for name in (*GROUPS, OTHERS):
        counted = rows_full.get(name)
        rows = "" if counted is None else f"{counted:,} ({counted / runs:.2f} per run)"
        lines.append(f"| {name} | {rows} | **{per_full[name]:,.0f}** | {per_plain[name]:,.0f} |")
    lines.append(f"| **all** | | **{sum(per_full.values()):,.0f}** | "
                 f"{sum(per_plain.values()):,.0f} |")
    return lines


async def run(args: argparse.Namespace) -> tuple[str, str, Footprint]:
    """Both phases on a fresh database; (body, headline, footprint)."""
    from benchmarks.common import Simulator, drop_database, fresh_database, pin_to

    started = time.perf_counter()
    pin_to(0)
    url = await asyncio.to_thread(fresh_database, args.server_url, DATABASE)
    try:
        with Simulator(SIMULATOR_ARGS) as simulator:
            single, load = await create_probes(url, simulator.base_url, args.rate,
                                               args.seconds)
            base = await snapshot(url, "FULL, ANALYZE")
            day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) \
                - timedelta(days=1)
            ticks = [day + timedelta(minutes=i) for i in range(args.runs)]
            runs = await measure_and_store(url, single, ticks, args.concurrency)
            runs_pack_s = await pack(url)
            plain = await snapshot(url, "ANALYZE")
            full = await snapshot(url, "FULL, ANALYZE")
            columns = await run_columns(url, single)
            loaded = await measure_and_store(url, load, [day + timedelta(hours=12)], 1)
            as_rows = await snapshot(url, "FULL, ANALYZE")
            load_pack_s = await pack(url)
            after = await snapshot(url, "FULL, ANALYZE")
    finally:
        if not args.keep:
            await asyncio.to_thread(drop_database, args.server_url, DATABASE)
    elapsed = time.perf_counter() - started

    grown_full = growth(by_group(base.tables), by_group(full.tables))
    grown_plain = growth(by_group(base.tables), by_group(plain.tables))
    per_full, per_plain = per(grown_full, runs.runs), per(grown_plain, runs.runs)
    run_total = sum(per_full.values())
    others = {name: size for name, size in growth(base.tables, full.tables).items()
              if group_of(name) == OTHERS and size}
    rows_full = {name: full.rows[name] - base.rows[name] for name in COUNTED}
    buckets = rows_full["rollups"]
    hourly = full.rows.get("rollups/3600", 0) - base.rows.get("rollups/3600", 0)
    daily = full.rows.get("rollups/86400", 0) - base.rows.get("rollups/86400", 0)
    bucket_bytes = (grown_full["rollups"] + grown_full["rollup_sketches"]) / max(buckets, 1)

    load_grown = growth(by_group(full.tables), by_group(after.tables))
    load_samples = after.rows["packed"] - full.rows["packed"]
    sample_bytes = load_grown["samples"] / load_samples
    rows_grown = growth(by_group(full.tables), by_group(as_rows.tables))
    row_sample_bytes = rows_grown["samples"] / (as_rows.rows["samples"] - full.rows["samples"])
    load_blocks = after.rows["blocks"] - full.rows["blocks"]
    load_run = {name: size for name, size in growth(full.tables, after.tables).items()
                if group_of(name) != "samples" and size}

    footprint = Footprint(
        run_bytes=per_full["runs"] + per_full[OTHERS],
        sample_bytes=sample_bytes, bucket_bytes=bucket_bytes)
    headline = (f"{run_total:,.0f} B per single-request run "
                f"({ratio(run_total, TARGET_RUN_BYTES)} its target), "
                f"{sample_bytes:,.1f} B per sample ({ratio(sample_bytes, TARGET_SAMPLE_BYTES)})")
    body = "\n".join([
        f"PostgreSQL 15 on this machine, a fresh database migrated to head. Runs measured "
        f"for real against the simulator (`sustain simulate {' '.join(SIMULATOR_ARGS)}`) by "
        f"the probes' runner as the executor measures a tick, and stored through the "
        f"service's `OfflineRuns` (tick claim, then `ingest.store.store_run`: samples, then "
        f"the final record through `db.results.apply_all` and the SLO counts). Whole "
        f"benchmark: {elapsed:.0f} s.",
        "",
        f"### Per run: {runs.runs:,} single-request streamed chat runs, one per minute of "
        f"scheduled time ({ticks[0]:%Y-%m-%d %H:%M} to {ticks[-1]:%H:%M} UTC)",
        "",
        f"{runs.succeeded:,} of {runs.runs:,} succeeded; one availability SLO covers the "
        f"probe. Measured in {runs.measure_s:.0f} s ({args.concurrency} at once), stored in "
        f"{runs.store_s:.1f} s ({runs.store_s / runs.runs * 1000:.1f} ms per run, one "
        f"transaction each). Growth per run by table, bytes (heap, TOAST, indexes):",
        "",
        "| table | rows added | per run, `VACUUM (FULL, ANALYZE)` | per run, plain "
        "`VACUUM (ANALYZE)` |",
        "|---|---|---|---|",
        *table_rows(per_full, per_plain, rows_full, runs.runs),
        "",
        "Others: " + (", ".join(f"{name} {size / runs.runs:,.0f} B per run"
                                for name, size in sorted(others.items())) or "none") + ". "
        f"Rollups: {buckets} buckets ({hourly} hourly, {daily} daily), "
        f"{bucket_bytes:,.0f} B per bucket (its `rollups` row and `rollup_sketches` rows). "
        f"The `samples` row is its run's sample packed (`sample_blocks`, a block a run: the "
        f"storage job packed the {runs.runs:,} runs in {runs_pack_s:.1f} s). A `runs` row "
        f"holds, on average: its summary's record {columns['record']:,.0f} B, the JSONB of "
        f"the summary's SQL keys {columns['summary']:,.0f} B, its sketch record "
        f"{columns['sketches']:,.0f} B (as stored, column by column).",
        "",
        f"### Per sample: one run at {args.rate:g} req/s for {args.seconds:g} s",
        "",
        f"{load_samples:,} samples stored (measured in {loaded.measure_s:.0f} s, stored in "
        f"{loaded.store_s:.1f} s with the run's final record) as `samples` rows: "
        f"{row_sample_bytes:,.1f} B per sample (daily partitions summed, with their "
        f"indexes), as they are while the run is recent. Packed by the storage job into "
        f"{load_blocks} blocks in {load_pack_s:.1f} s, the samples (rows and blocks) take "
        f"{human(load_grown['samples'])} after `VACUUM (FULL, ANALYZE)`: "
        f"**{sample_bytes:,.1f} B per sample**. The run's own records besides: "
        + ", ".join(f"{name} {human(size)}" for name, size in sorted(load_run.items())) + ".",
        "",
        f"Targets: <= {TARGET_RUN_BYTES:,} B per single-request run: "
        f"{run_total:,.0f} B, ratio to target {ratio(run_total, TARGET_RUN_BYTES)}; "
        f"<= {TARGET_SAMPLE_BYTES} B per sample: {sample_bytes:,.1f} B, ratio to target "
        f"{ratio(sample_bytes, TARGET_SAMPLE_BYTES)}.",
    ])
    return body, headline, footprint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default=SERVER_URL)
    parser.add_argument("--runs", type=int, default=1440,
                        help="single-request runs, one per minute of scheduled time")
    parser.add_argument("--concurrency", type=int, default=32,
                        help="single-request runs measured at once")
    parser.add_argument("--rate", type=float, default=200.0, help="load run, requests/s")
    parser.add_argument("--seconds", type=float, default=40.0, help="load run, seconds")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--sizing", action="store_true",
                        help="also print docs/sizing.md's table from the figures")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    import uvloop

    body, headline, footprint = uvloop.run(run(args))
    if args.no_record:
        print(body)
    else:
        record("storage: bytes kept per run and per sample, by table",
               "python " + " ".join(sys.argv), body, headline=headline)
    if args.sizing:
        print(f"\n{footprint}\n")
        print(sizing_table(footprint))


if __name__ == "__main__":
    main()
