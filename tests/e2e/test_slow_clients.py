"""`sustain serve` under thousands of slow request heads (slowloris), with a lowered file
limit: /healthz keeps answering fresh connections (the attack: tests/slow_heads.py), and the
replica's background work (its heartbeat, the scheduler, the sample writer, the alert and
notification loops) lives on."""

from __future__ import annotations

import asyncio
import re
import resource
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.conftest import asyncpg_dsn
from tests.processes import free_port, wait_until
from tests.slow_heads import (
    SERVER_FILE_LIMIT,
    SLOW_HEADS,
    attack,
    raised_file_limit,
    serve_with_a_low_file_limit,
    sockets_needed,
)

HEALTHZ_GUARD_S = 10.0
"""How long one /healthz may take before the test calls it starved (a hang guard: without
the connection cap, a fresh connection is never accepted at all once the heads hold every
file descriptor). How fast it is answered is benchmarks/slow_heads.py's figure, against a
kubelet probe's 1 s timeout."""
REPLICA = "slow-heads"


@pytest.fixture
def own_file_limit() -> Iterator[None]:
    """This test process's soft file limit at its hard limit while the test runs (it holds
    SLOW_HEADS sockets)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < sockets_needed():
        pytest.skip(f"the hard file limit ({hard}) is below the {sockets_needed()} sockets "
                    "needed")
    with raised_file_limit():
        yield


async def heartbeat_at(database_url: str) -> datetime | None:
    connection = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        found: datetime | None = await connection.fetchval(
            "SELECT heartbeat_at FROM replicas WHERE id = $1", REPLICA)
        return found
    finally:
        await connection.close()


@pytest.mark.usefixtures("own_file_limit")
def test_slow_request_heads_neither_starve_healthz_nor_stop_background_work(
        tmp_path: Path, database_url: str) -> None:
    port = free_port()
    service = serve_with_a_low_file_limit(port, tmp_path / "serve.log", database_url, REPLICA)
    with service:
        service.wait_http(f"http://127.0.0.1:{port}/readyz")
        before = asyncio.run(heartbeat_at(database_url))
        assert before is not None
        found = attack(port, HEALTHZ_GUARD_S)
        assert found.connects > SERVER_FILE_LIMIT  # the limit was really under pressure
        assert [a.status for a in found.answers] == [200] * len(found.answers), found.answers
        print(f"/healthz under {SLOW_HEADS} slow heads: "
              f"max {max(a.seconds for a in found.answers):.3f} s over {len(found.answers)}")

        during = asyncio.run(heartbeat_at(database_url))
        assert during is not None
        assert during > before  # the heartbeat went on during the attack
        wait_until(  # a hang guard only: heartbeats come every few seconds
            lambda: (asyncio.run(heartbeat_at(database_url)) or during) > during, 15)
        # every background loop (heartbeat, listener, cancel watcher, alert evaluation,
        # notification delivery) and the scheduler still run: /readyz would name one that
        # stopped
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10)
        assert ready.status_code == 200, ready.text
        log = service.output()
        cap = re.search(r"serving at most (\d+) open connections", log)
        assert cap is not None, log[-3000:]
        assert int(cap.group(1)) < SERVER_FILE_LIMIT
        for death in ("Traceback", "never retrieved", "unexpectedly", "out of system resource",
                      "Too many open files"):
            assert death not in log, log[-5000:]
