"""Readers that never read: the attack was ~20 sockets requesting a run's CSV export and then
reading nothing. Each held a database session across its writes ("idle in transaction"), the
pool ran dry, API calls waited 25 s and failed 500, the sample writer found the database
unavailable, /readyz went 503 and ticks were missed.

Now an export reads one page per short transaction and holds no connection while it writes;
exports in flight are capped per key (or anonymous address) and in all (429, Retry-After); a
reader that takes nothing for SUSTAIN_EXPORT_WRITE_TIMEOUT_S is closed; and the REST
API has its own database pool (SUSTAIN_DATABASE_API_POOL_SIZE), so measuring and storing
keep theirs. The app runs under uvicorn with the guarded protocol on loopback; the readers
are raw sockets. Asserted: statuses, counts, rows, pg_stat_activity; never a time."""

from __future__ import annotations

import asyncio
import csv
import io
import random
import re
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

import sustain.service.db.engine as engine_module
from sustain.service.app import create_app, runtime_of
from sustain.service.export.samples import ExportRequest, export_samples
from sustain.service.http_protocol import guarded_config
from sustain.service.runs.rows import SAMPLE_COLUMNS
from sustain.service.runtime import Replica
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    app_settings,
    create_endpoint,
    create_probe,
    serving,
    wait_for_run,
)
from tests.integration.service.storage import (
    create_probe_rows,
    fetch,
    seed_run,
    synthetic_samples,
)
from tests.processes import ADMIN_HEADERS, TEST_ADMIN_KEY

NOW = datetime.now(UTC).replace(microsecond=0)
HANG_GUARD_S = 20.0
"""How long a test waits for something that must happen (a hang guard, not a measurement)."""
SAMPLES = 40_000
"""Samples of the exported run: its CSV (about 8 MB) is far beyond what loopback socket
buffers take from a client that never reads, so its export stalls on the socket."""
PER_KEY, TOTAL = 2, 8
"""The export limits of these apps (the defaults)."""
CSV_ROW_BYTES = 100
"""Fewer bytes than any CSV row of these samples has."""
SERVICE_ROOT = Path(__file__).resolve().parents[2] / "service"


async def eventually(predicate: Callable[[], bool], timeout_s: float = HANG_GUARD_S) -> None:
    """Wait until predicate() holds (a hang guard)."""
    async with asyncio.timeout(timeout_s):
        while not predicate():  # noqa: ASYNC110 - polling state of the server under test
            await asyncio.sleep(0.05)


@asynccontextmanager
async def listening(database_url: str, **fields: Any) -> AsyncIterator[tuple[int, Replica]]:
    """An app of these settings served as `sustain serve` serves it (uvicorn, the guarded
    protocol) on a loopback port, its lifespan running; the port and its replica."""
    settings = app_settings(database_url, auto_migrate=False, **fields)
    app = create_app(settings)
    server = uvicorn.Server(guarded_config(app, settings, host="127.0.0.1", port=0,
                                           log_config=None, lifespan="on"))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(30):  # hang guard
        while not server.started:  # noqa: ASYNC110 - uvicorn offers no event
            await asyncio.sleep(0.05)
    try:
        yield server.servers[0].sockets[0].getsockname()[1], runtime_of(app)
    finally:
        server.should_exit = True
        await task


async def seed_big_run(engine: AsyncEngine, count: int = SAMPLES) -> int:
    """A final run of `count` samples: ten written by the write path, the rest copies of them
    made by Postgres (fast)."""
    probe_id = await create_probe_rows(engine, "exported")
    run_id = await seed_run(engine, probe_id, NOW,
                            synthetic_samples(10, NOW, random.Random(3)))
    columns = ", ".join(SAMPLE_COLUMNS)
    copied = ", ".join("pos + k * 10" if c == "pos" else c for c in SAMPLE_COLUMNS)
    async with engine.begin() as connection:
        await connection.execute(text(
            f"INSERT INTO samples ({columns}) SELECT {copied} FROM samples, "
            "generate_series(1, :copies) AS k WHERE run_id = :run"),
            {"copies": count // 10 - 1, "run": run_id})
    return run_id


async def viewer_keys(port: int, count: int) -> list[str]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                 headers=ADMIN_HEADERS) as admin:
        keys = []
        for n in range(count):
            r = await admin.post("/api/v1/keys", json={"name": f"reader-{n}", "role": "viewer"})
            assert r.status_code == 201, r.text
            keys.append(str(r.json()["key"]))
        return keys


async def request_raw(port: int, path: str, key: str) -> socket.socket:
    """A GET sent on a raw non-blocking socket, nothing read."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    await loop.sock_connect(sock, ("127.0.0.1", port))
    await loop.sock_sendall(sock, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            f"Authorization: Bearer {key}\r\n\r\n".encode())
    return sock


async def answer_head(sock: socket.socket) -> bytes:
    """The first bytes the server answered (its status line, and more of a short answer):
    one small read, so a long answer stays unread."""
    async with asyncio.timeout(HANG_GUARD_S):
        return await asyncio.get_running_loop().sock_recv(sock, 1024)


async def read_to_end(sock: socket.socket) -> int:
    """Read what is left until the server closes; the bytes read."""
    loop = asyncio.get_running_loop()
    total = 0
    async with asyncio.timeout(HANG_GUARD_S):
        try:
            while chunk := await loop.sock_recv(sock, 1 << 20):
                total += len(chunk)
        except ConnectionResetError:
            pass
    return total


async def stuck_transactions(engine: AsyncEngine) -> list[Any]:
    """Connections to this test's database idle in a transaction for more than a moment."""
    return await fetch(engine, "SELECT pid, state, query FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                       "AND state LIKE 'idle in transaction%' "
                       "AND state_change < now() - interval '1 second'")


async def test_twenty_readers_that_never_read_leave_the_api_and_the_measuring_path_alone(
        database_url: str, engine: AsyncEngine, simulator: SimulatorHandle) -> None:
    run_id = await seed_big_run(engine)
    async with listening(database_url, export_max_concurrent_per_key=PER_KEY,
                         export_max_concurrent=TOTAL,
                         export_write_timeout_s=600) as (port, replica):
        keys = await viewer_keys(port, 5)
        sockets: list[socket.socket] = []
        heads: list[bytes] = []
        try:
            for key in keys:  # 5 keys x 4 exports: 2 per key, 8 in all
                for _ in range(4):
                    sockets.append(await request_raw(
                        port, f"/api/v1/runs/{run_id}/samples?format=csv", key))
                    heads.append(await answer_head(sockets[-1]))
            statuses = [int(head.split(b" ", 2)[1]) for head in heads]
            assert statuses.count(200) == TOTAL, statuses
            assert statuses.count(429) == 20 - TOTAL, statuses
            refused = [h for h, s in zip(heads, statuses, strict=True) if s == 429]
            assert all(b"retry-after: " in h.lower() for h in refused)
            # keys 1-4 each past their own share, key 5 past the total
            assert sum(b"SUSTAIN_EXPORT_MAX_CONCURRENT_PER_KEY" in h for h in refused) == 8
            assert sum(b"(SUSTAIN_EXPORT_MAX_CONCURRENT)" in h for h in refused) == 4
            assert replica.exports.in_flight == TOTAL

            await asyncio.sleep(2)  # let the accepted exports fill every buffer and stall
            assert replica.exports.in_flight == TOTAL  # stalled: the CSV did not fit
            assert await stuck_transactions(engine) == []

            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                         headers=ADMIN_HEADERS, timeout=HANG_GUARD_S) as api:
                ready = await api.get("/readyz")
                assert ready.status_code == 200, ready.text
                assert (await api.get(f"/api/v1/runs/{run_id}")).status_code == 200
                # the measuring path: a run measures and stores every sample meanwhile
                endpoint = await create_endpoint(api, simulator.base_url)
                probe = await create_probe(api, endpoint["id"], enabled=False,
                                           profile={"kind": "concurrency", "users": 2,
                                                    "max_requests": 6},
                                           workload={"max_tokens": 4})
                measured = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()
                run = await wait_for_run(api, measured["id"])
                assert run["status"] == "succeeded", run
                stored = await fetch(engine, "SELECT count(*) FROM samples WHERE run_id = :r",
                                     r=measured["id"])
                assert stored[0][0] == 6
                assert await stuck_transactions(engine) == []
        finally:
            for sock in sockets:
                sock.close()
        await eventually(lambda: replica.exports.in_flight == 0)  # each slot given back


async def test_a_reader_that_stops_reading_is_closed_at_the_write_deadline(
        database_url: str, engine: AsyncEngine) -> None:
    run_id = await seed_big_run(engine)
    async with listening(database_url, export_write_timeout_s=0.5) as (port, replica):
        sockets = [await request_raw(port, f"/api/v1/runs/{run_id}/samples?format=csv",
                                     TEST_ADMIN_KEY) for _ in range(PER_KEY)]
        try:
            await eventually(lambda: replica.exports.in_flight == PER_KEY)
            await eventually(lambda: replica.exports.in_flight == 0)
            for sock in sockets:  # cut off: what it got is short of the whole export
                assert await read_to_end(sock) < SAMPLES * CSV_ROW_BYTES
        finally:
            for sock in sockets:
                sock.close()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                     headers=ADMIN_HEADERS, timeout=HANG_GUARD_S) as api:
            r = await api.get(f"/api/v1/runs/{run_id}/samples", params={"format": "csv"})
            assert r.status_code == 200
            assert r.text.count("\n") == SAMPLES + 1  # a reader that reads gets it whole


async def test_a_json_page_holds_its_export_slot_until_it_is_read(
        database_url: str, engine: AsyncEngine) -> None:
    run_id = await seed_big_run(engine, 20_000)
    path = f"/api/v1/runs/{run_id}/samples?limit=10000"
    async with listening(database_url) as (port, replica):
        sockets = [await request_raw(port, path, TEST_ADMIN_KEY) for _ in range(PER_KEY)]
        try:
            heads = [await answer_head(sock) for sock in sockets]
            assert all(head.startswith(b"HTTP/1.1 200") for head in heads)
            extra = await request_raw(port, path, TEST_ADMIN_KEY)
            sockets.append(extra)
            refused = await answer_head(extra)
            assert refused.startswith(b"HTTP/1.1 429"), refused[:200]
            assert replica.exports.in_flight == PER_KEY  # both pages still unread
            await read_to_end_of_answer(sockets[0], heads[0])
            await eventually(lambda: replica.exports.in_flight == PER_KEY - 1)
        finally:
            for sock in sockets:
                sock.close()
        await eventually(lambda: replica.exports.in_flight == 0)


async def read_to_end_of_answer(sock: socket.socket, head: bytes) -> None:
    """Read one answer whole (by its Content-Length), starting from its first bytes."""
    found = re.search(rb"content-length: (\d+)", head, re.IGNORECASE)
    assert found is not None, head[:300]
    body_so_far = len(head) - head.index(b"\r\n\r\n") - 4
    left = int(found.group(1)) - body_so_far
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(HANG_GUARD_S):
        while left > 0:
            chunk = await loop.sock_recv(sock, min(left, 1 << 20))
            assert chunk, "closed before the answer was whole"
            left -= len(chunk)


async def test_an_api_request_that_finds_its_pool_busy_is_503_and_measuring_keeps_its_own(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "API_POOL_TIMEOUT_S", 0.3)
    app = create_app(app_settings(database_url, auto_migrate=False,
                                  database_api_pool_size=1))
    async with serving(app) as api:
        replica = runtime_of(app)
        async with replica.api_engine.connect() as held:  # the API's only connection
            await held.execute(text("SELECT 1"))
            r = await api.get("/api/v1/runs")
            assert r.status_code == 503, r.text
            assert r.headers["content-type"] == "application/problem+json"
            assert int(r.headers["retry-after"]) > 0
            async with replica.engine.connect() as measuring:  # measuring has its own pool
                assert (await measuring.execute(text("SELECT 1"))).scalar_one() == 1
        assert (await api.get("/api/v1/runs")).status_code == 200


def test_no_route_or_page_reaches_the_measuring_engine() -> None:
    """Routes, pages, authentication and the audit log use Replica.api_engine/api_sessions;
    Replica.engine and Replica.sessions are for measuring, storing and the background loops."""
    measuring = re.compile(r"\b(state|replica|runtime)\.(engine|sessions)\b")
    found = [f"{path.relative_to(SERVICE_ROOT)}:{n}: {line.strip()}"
             for folder in ("api", "web") for path in (SERVICE_ROOT / folder).rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if measuring.search(line)]
    assert found == []


async def test_the_cli_export_reads_page_by_page_and_loses_no_sample(
        engine: AsyncEngine) -> None:
    """`sustain export` reads in short transactions too (a pipe nobody reads holds none open):
    25,000 samples, most sharing their sent_at with others, over three pages, each once."""
    run_id = await seed_big_run(engine, 25_000)
    out = io.StringIO()
    request = ExportRequest("exported", NOW - timedelta(hours=1), NOW + timedelta(hours=1))
    assert await export_samples(engine, request, "csv", text_out=out) == 25_000
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len({(row["run_id"], row["pos"]) for row in rows}) == 25_000
    assert {int(row["run_id"]) for row in rows} == {run_id}
