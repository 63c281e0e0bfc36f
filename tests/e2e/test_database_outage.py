"""The database goes away for 30 s in the middle of a run: samples wait in the buffer, /readyz
says so, and when the database is back every sample the client produced is stored exactly once
and the run finishes, without anyone restarting sustain. A probe scheduled every 2 s keeps
running through the outage (issue 15: its ticks used to be recorded `missed`): each tick due
meanwhile succeeds and is stored once, and the requests the simulator received equal the
samples stored."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from sustain.service.db.embedded import EmbeddedPostgres
from sustain.service.db.migrate import upgrade_to_head
from tests.conftest import asyncpg_dsn
from tests.processes import SustainProcess, admin_client, free_port, wait_until

OUTAGE_S = 30.0
TICK_S = 2
RATE = 10
DURATION_S = 40


@pytest.fixture
def second_cluster() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL cluster of this test's own, so stopping it harms no other test. Its socket
    lives in its data directory, so the URL stays the same across restarts; a short path keeps
    the socket name within the Unix limit."""
    data = Path(tempfile.mkdtemp(prefix="sustain-outage-"))
    server = EmbeddedPostgres(data)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)


async def stored(url: str, run_id: int) -> tuple[int, int, int, list[int]]:
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        total, distinct = await connection.fetchrow(
            "SELECT count(*), count(DISTINCT seq) FROM samples WHERE run_id = $1", run_id)
        positions = [r[0] for r in await connection.fetch(
            "SELECT seq FROM samples WHERE run_id = $1 ORDER BY pos", run_id)]
        sketches = await connection.fetchval(
            "SELECT count(*) FROM run_sketches WHERE run_id = $1", run_id)
        return int(total), int(distinct), int(sketches), positions
    finally:
        await connection.close()


async def ticks(url: str, probe_id: int, start: datetime, end: datetime
                ) -> list[tuple[datetime, str, str, int | None]]:
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        rows = await connection.fetch(
            "SELECT scheduled_for, trigger, status, attempts FROM runs WHERE probe_id = $1 "
            "AND scheduled_for >= $2 AND scheduled_for < $3 ORDER BY scheduled_for",
            probe_id, start, end)
        return [(r[0], r[1], r[2], r[3]) for r in rows]
    finally:
        await connection.close()


async def all_samples(url: str) -> tuple[int, int]:
    """Samples stored, and runs not final yet."""
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        samples = await connection.fetchval("SELECT count(*) FROM samples")
        open_runs = await connection.fetchval(
            "SELECT count(*) FROM runs WHERE status IN ('pending', 'running')")
        return int(samples), int(open_runs)
    finally:
        await connection.close()


def test_samples_survive_a_database_outage_exactly_once(
        tmp_path: Path, second_cluster: EmbeddedPostgres) -> None:
    assert second_cluster.url is not None
    url = second_cluster.url.render_as_string(hide_password=False)
    upgrade_to_head(url)
    sim_port, port = free_port(), free_port()
    truth = tmp_path / "truth.jsonl"
    simulator = SustainProcess(
        ["simulate", "--port", str(sim_port), "--ttft-ms", "20", "--itl-ms", "5",
         "--output-tokens", "8", "--truth-log", str(truth)], tmp_path / "simulator.log")
    service = SustainProcess(["serve", "--port", str(port)], tmp_path / "serve.log",
                             env={"SUSTAIN_DATABASE_URL": url})
    with simulator, service, admin_client(f"http://127.0.0.1:{port}",
                                          timeout=5) as api:
        simulator.wait_http(f"http://127.0.0.1:{sim_port}/v1/models")
        service.wait_http(f"http://127.0.0.1:{port}/readyz")
        endpoint = api.post("/api/v1/endpoints", json={
            "name": "sim", "base_url": f"http://127.0.0.1:{sim_port}/v1",
            "model": "sim-model"}).json()
        probe = api.post("/api/v1/probes", json={
            "name": "outage", "endpoint_id": endpoint["id"], "interval_seconds": 3600,
            "enabled": False,
            "profile": {"kind": "constant", "rate": RATE, "duration_s": DURATION_S},
            "workload": {"max_tokens": 8}}).json()
        run = api.post(f"/api/v1/probes/{probe['id']}/runs").json()
        assert "id" in run, run
        ticking = api.post("/api/v1/probes", json={
            "name": "ticking", "endpoint_id": endpoint["id"], "interval_seconds": TICK_S,
            "profile": {"kind": "constant", "rate": 5, "duration_s": 1},
            "workload": {"max_tokens": 8}}).json()

        def going() -> bool:
            """The long run has stored samples and the ticking probe has run once."""
            measured = asyncio.run(stored(url, int(run["id"])))[0]
            ran = asyncio.run(ticks(url, int(ticking["id"]), datetime(2000, 1, 1, tzinfo=UTC),
                                    datetime.now(UTC)))
            return measured > 0 and any(status == "succeeded" for _, _, status, _ in ran)

        wait_until(going, 60, 0.25)  # the outage starts in the middle of both

        second_cluster.stop()
        outage_began = datetime.now(UTC)
        outage_ends = time.monotonic() + OUTAGE_S
        answers: list[int] = []
        while time.monotonic() < outage_ends:
            answers.append(api.get("/readyz").status_code)
            time.sleep(0.5)
        assert 503 in answers, answers
        assert answers[-1] == 503
        second_cluster.start()
        outage_ended = datetime.now(UTC)
        back = time.monotonic()

        deadline = back + 60
        body: dict[str, object] = {}
        ready_after: float | None = None
        while time.monotonic() < deadline:
            if ready_after is None and api.get("/readyz").status_code == 200:
                ready_after = time.monotonic() - back
            r = api.get(f"/api/v1/runs/{run['id']}")
            if r.status_code == 200:
                body = r.json()
                if ready_after is not None and body["status"] not in ("pending", "running"):
                    break
            time.sleep(0.25)
        assert ready_after is not None, api.get("/readyz").text
        assert body.get("status") == "succeeded", (body, service.output()[-3000:])
        # Stop the ticks without cancelling a run in flight (disabling would cancel it, and
        # a cancelled run keeps only the samples that completed), then wait for quiet.
        api.patch(f"/api/v1/probes/{ticking['id']}", json={"interval_seconds": 3600})
        quiet = 0
        for _ in range(240):
            stored_total, still_open = asyncio.run(all_samples(url))
            quiet = quiet + 1 if not still_open else 0
            if quiet >= 8:  # 2 s without a run in flight: any catch-up run has finished
                break
            time.sleep(0.25)
        assert quiet >= 8

    during = asyncio.run(ticks(url, int(ticking["id"]), outage_began, outage_ended))
    assert len(during) >= OUTAGE_S / TICK_S - 2, (during, service.output()[-3000:])
    assert {(trigger, status) for _, trigger, status, _ in during} == {
        ("schedule", "succeeded")}, during
    assert len({tick for tick, *_ in during}) == len(during)
    assert all(attempts == 5 for *_, attempts in during), during
    sent = sum(1 for line in truth.read_text().splitlines() if line.strip())
    assert sent == stored_total, (sent, stored_total)

    summary = body["summary"]
    assert isinstance(summary, dict)
    total, distinct, sketches, seqs = asyncio.run(stored(url, int(run["id"])))
    assert summary["attempts"] >= RATE * DURATION_S * 0.9
    assert total == distinct == summary["attempts"]
    assert body["samples_dropped"] == 0
    assert seqs == sorted(seqs), "samples of a run are written in order"
    assert sketches > 0
    print(f"outage {OUTAGE_S:.0f} s: {total} samples stored once; ready again "
          f"{ready_after:.1f} s after the database came back; {len(during)} ticks due "
          f"meanwhile ran and were stored once; {sent} requests sent, {stored_total} stored")
