"""The database goes away for 20 s in the middle of a run: samples wait in the buffer, /readyz
says so, and when the database is back every sample the client produced is stored exactly once
and the run finishes, without anyone restarting sustain."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from sustain.service.db.embedded import EmbeddedPostgres
from sustain.service.db.migrate import upgrade_to_head
from tests.conftest import asyncpg_dsn
from tests.processes import SustainProcess, admin_client, free_port

OUTAGE_S = 20.0
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


def test_samples_survive_a_database_outage_exactly_once(
        tmp_path: Path, second_cluster: EmbeddedPostgres) -> None:
    assert second_cluster.url is not None
    url = second_cluster.url.render_as_string(hide_password=False)
    upgrade_to_head(url)
    sim_port, port = free_port(), free_port()
    simulator = SustainProcess(
        ["simulate", "--port", str(sim_port), "--ttft-ms", "20", "--itl-ms", "5",
         "--output-tokens", "8"], tmp_path / "simulator.log")
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
        time.sleep(5)

        second_cluster.stop()
        outage_ends = time.monotonic() + OUTAGE_S
        answers: list[int] = []
        while time.monotonic() < outage_ends:
            answers.append(api.get("/readyz").status_code)
            time.sleep(0.5)
        assert 503 in answers, answers
        assert answers[-1] == 503
        second_cluster.start()
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

    summary = body["summary"]
    assert isinstance(summary, dict)
    total, distinct, sketches, seqs = asyncio.run(stored(url, int(run["id"])))
    assert summary["attempts"] >= RATE * DURATION_S * 0.9
    assert total == distinct == summary["attempts"]
    assert body["samples_dropped"] == 0
    assert seqs == sorted(seqs), "samples of a run are written in order"
    assert sketches > 0
    print(f"outage {OUTAGE_S:.0f} s: {total} samples stored once; ready again "
          f"{ready_after:.1f} s after the database came back")
