"""Thousands of slow request heads (slowloris) against a live `sustain serve` whose file limit
is lowered, with GET /healthz asked on fresh connections throughout: shared by
tests/e2e/test_slow_clients.py (the behaviour: /healthz is answered, background work lives on)
and benchmarks/slow_heads.py (the figure: how fast /healthz is answered, against a kubelet
probe's 1 s timeout)."""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.processes import SustainProcess, sustain_command

SERVER_FILE_LIMIT = 1024
"""The soft and hard RLIMIT_NOFILE `sustain serve` runs under (a common default)."""
SLOW_HEADS = 3000
"""Slow request heads held open (and re-opened when cut off) at once: three times the limit."""
TICKS = 6
"""Seconds of attack: each second every open head gets one more header line."""
MAX_CONNECTS = 25_000
"""At most this many connections in all (a bound on the load loop, with TICKS)."""
HEALTHZ_PER_TICK = 3
HEADER_TIMEOUT_S = 2
KUBELET_TIMEOUT_S = 1.0
"""A kubelet probe's default timeout: the target for how fast /healthz is answered."""


def sockets_needed() -> int:
    """File descriptors this process needs to hold the heads."""
    return SLOW_HEADS + 500


@contextmanager
def raised_file_limit() -> Iterator[None]:
    """This process's soft file limit at its hard limit while the attack runs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def serve_with_a_low_file_limit(port: int, log: Path, database_url: str,
                                replica: str) -> SustainProcess:
    """`sustain serve` under SERVER_FILE_LIMIT open files, with fast background loops."""
    return SustainProcess(
        ["serve", "--port", str(port)], log,
        env={"SUSTAIN_DATABASE_URL": database_url, "SUSTAIN_REPLICA_ID": replica,
             "SUSTAIN_HTTP_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
             "SUSTAIN_HEARTBEAT_S": "1", "SUSTAIN_ALERT_EVALUATION_S": "1",
             "SUSTAIN_RECONCILE_S": "1"},
        program=["prlimit", f"--nofile={SERVER_FILE_LIMIT}:{SERVER_FILE_LIMIT}",
                 *sustain_command()])


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


def _recv_before(sock: socket.socket, deadline: float) -> bytes:
    """What the socket receives next (b"": closed); TimeoutError once `deadline` (monotonic)
    has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    sock.settimeout(left)
    return sock.recv(65536)


@dataclass(frozen=True, slots=True)
class Healthz:
    status: int | None
    """The answer's status; None when it was not answered whole within the guard."""
    seconds: float
    """From connecting to the whole answer (or to giving up)."""
    failure: str | None = None


def healthz(port: int, guard_s: float) -> Healthz:
    """GET /healthz on a fresh connection, waiting at most `guard_s` for the whole answer."""
    began = time.monotonic()
    deadline = began + guard_s
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=guard_s) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Connection: close\r\n\r\n")
            answer = b""
            while chunk := _recv_before(sock, deadline):
                answer += chunk
    except OSError as exc:
        return Healthz(None, time.monotonic() - began, type(exc).__name__)
    return Healthz(int(answer.split(b" ", 2)[1]), time.monotonic() - began)


@dataclass
class Attack:
    connects: int = 0
    """Connections opened in all."""
    answers: list[Healthz] = field(default_factory=list)
    """Every /healthz asked during the attack, in order."""


def _feed(heads: list[socket.socket]) -> list[socket.socket]:
    """One more header line on each open head; those cut off are closed and dropped."""
    alive = []
    for sock in heads:
        try:
            sock.send(b"X-Slow: 1\r\n")
            alive.append(sock)
        except OSError:
            sock.close()
    return alive


def attack(port: int, guard_s: float) -> Attack:
    """TICKS seconds of slow heads (kept at SLOW_HEADS, re-opened when the server cuts them
    off), asking /healthz HEALTHZ_PER_TICK times a second on fresh connections."""
    found = Attack()
    heads: list[socket.socket] = []
    try:
        for _ in range(TICKS):
            tick = time.monotonic()
            heads = _feed(heads)
            while len(heads) < SLOW_HEADS and found.connects < MAX_CONNECTS \
                    and time.monotonic() - tick < 5:
                found.connects += 1
                if (fresh := open_slow_head(port)) is not None:
                    heads.append(fresh)
            found.answers.extend(healthz(port, guard_s) for _ in range(HEALTHZ_PER_TICK))
            time.sleep(max(0.0, 1 - (time.monotonic() - tick)))
    finally:
        for sock in heads:
            sock.close()
    return found
