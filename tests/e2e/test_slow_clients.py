"""`sustain serve` under thousands of slow request heads (slowloris), with a lowered file
limit: /healthz keeps answering fresh connections, and the replica's background work (its
heartbeat, the scheduler, the sample writer, the alert and notification loops) lives on."""

from __future__ import annotations

import asyncio
import re
import resource
import socket
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.conftest import asyncpg_dsn
from tests.processes import SustainProcess, free_port, sustain_command, wait_until

SERVER_FILE_LIMIT = 1024
"""The soft and hard RLIMIT_NOFILE `sustain serve` runs under (a common default)."""
SLOW_HEADS = 3000
"""Slow request heads held open (and re-opened when cut off) at once: three times the limit."""
TICKS = 6
"""Seconds of attack: each second every open head gets one more header line."""
MAX_CONNECTS = 25_000
"""At most this many connections in all (a bound on the load loop, with TICKS)."""
HEALTHZ_DEADLINE_S = 1.0
"""A fresh connection's GET /healthz must be answered whole within this (a hang guard: a
kubelet probe with a 1 s timeout)."""
HEADER_TIMEOUT_S = 2
REPLICA = "slow-heads"


@pytest.fixture
def own_file_limit() -> Iterator[None]:
    """This test process's soft file limit at its hard limit while the test runs (it holds
    SLOW_HEADS sockets)."""
    needed = SLOW_HEADS + 500
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"the hard file limit ({hard}) is below the {needed} sockets needed")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def open_slow_head(port: int) -> socket.socket | None:
    """A connection that has sent the first line of a request head (None: refused or not
    accepted in time)."""
    sock = socket.socket()
    sock.settimeout(1.0)
    try:
        sock.connect(("127.0.0.1", port))
        sock.sendall(b"GET / HTTP/1.1\r\n")
        sock.setblocking(False)
    except OSError:
        sock.close()
        return None
    return sock


def recv_before(sock: socket.socket, deadline: float) -> bytes:
    """What the socket receives next (b"": closed); TimeoutError once `deadline` (monotonic)
    has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    sock.settimeout(left)
    return sock.recv(65536)


def healthz_status(port: int) -> int:
    """GET /healthz on a fresh connection; AssertionError unless answered whole within
    HEALTHZ_DEADLINE_S."""
    deadline = time.monotonic() + HEALTHZ_DEADLINE_S
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=HEALTHZ_DEADLINE_S) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Connection: close\r\n\r\n")
            answer = b""
            while chunk := recv_before(sock, deadline):
                answer += chunk
    except OSError as exc:
        raise AssertionError(f"/healthz not answered within {HEALTHZ_DEADLINE_S}s "
                             f"({type(exc).__name__})") from None
    return int(answer.split(b" ", 2)[1])


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
    service = SustainProcess(
        ["serve", "--port", str(port)], tmp_path / "serve.log",
        env={"SUSTAIN_DATABASE_URL": database_url, "SUSTAIN_REPLICA_ID": REPLICA,
             "SUSTAIN_HTTP_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT_S),
             "SUSTAIN_HEARTBEAT_SECONDS": "1", "SUSTAIN_ALERT_EVALUATION_SECONDS": "1",
             "SUSTAIN_RECONCILE_SECONDS": "1"},
        program=["prlimit", f"--nofile={SERVER_FILE_LIMIT}:{SERVER_FILE_LIMIT}",
                 *sustain_command()])
    heads: list[socket.socket] = []
    with service:
        service.wait_http(f"http://127.0.0.1:{port}/readyz")
        before = asyncio.run(heartbeat_at(database_url))
        assert before is not None
        connects = 0
        try:
            for _ in range(TICKS):
                tick = time.monotonic()
                alive = []
                for sock in heads:  # one more header line each; those cut off are replaced
                    try:
                        sock.send(b"X-Slow: 1\r\n")
                        alive.append(sock)
                    except OSError:
                        sock.close()
                heads = alive
                while len(heads) < SLOW_HEADS and connects < MAX_CONNECTS \
                        and time.monotonic() - tick < 5:
                    connects += 1
                    if (fresh := open_slow_head(port)) is not None:
                        heads.append(fresh)
                for _ in range(3):
                    assert healthz_status(port) == 200
                time.sleep(max(0.0, 1 - (time.monotonic() - tick)))
        finally:
            for sock in heads:
                sock.close()
        assert connects > SERVER_FILE_LIMIT  # the limit was really under pressure

        during = asyncio.run(heartbeat_at(database_url))
        assert during is not None
        assert during > before  # the heartbeat went on during the attack
        wait_until(lambda: (asyncio.run(heartbeat_at(database_url)) or during) > during, 15)
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
