"""The HTTP protocol of `sustain serve` over real loopback sockets: a request not received whole
within the deadline is cut off, and past the open-connection cap the longest idle or slow
connection is closed so that a fresh one is served."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from sustain.service.http_protocol import GuardedConfig
from tests.processes import free_port, wait_until

HANG_GUARD_S = 10.0
"""How long a test waits for something that must happen (a hang guard, not a measurement)."""


async def tiny_app(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                   send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    """Answers every request with 200 `ok`, after reading its body."""
    assert scope["type"] == "http"
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@contextmanager
def guarded_server(header_timeout_s: float, cap: int, *, max_head_bytes: int = 64 * 1024,
                   write_timeout_s: float = 30.0, app: Any = tiny_app
                   ) -> Iterator[tuple[int, GuardedConfig]]:
    """`app` (tiny_app) served by uvicorn with the guarded protocol, in a thread; stopped on
    exit."""
    port = free_port()
    config = GuardedConfig(app, header_timeout_s=header_timeout_s,
                           max_open_connections=cap, max_head_bytes=max_head_bytes,
                           write_timeout_s=write_timeout_s, host="127.0.0.1", port=port,
                           log_config=None, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, HANG_GUARD_S)
        yield port, config
    finally:
        server.should_exit = True
        thread.join(HANG_GUARD_S)


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed the connection (EOF or reset), waiting up to the hang
    guard."""
    sock.settimeout(HANG_GUARD_S)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True


def get(port: int, path: str = "/") -> bytes:
    """One whole GET on a fresh connection; the raw answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_request_head_sent_too_slowly_is_cut_off() -> None:
    with guarded_server(header_timeout_s=0.5, cap=100) as (port, _):
        with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\n")
            for _ in range(3):  # a header line now and then keeps nothing alive
                time.sleep(0.3)
                try:
                    sock.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    break
            assert closed_by_server(sock)
        assert get(port).startswith(b"HTTP/1.1 200")


def test_a_connection_that_sends_nothing_is_cut_off() -> None:
    with guarded_server(header_timeout_s=0.5, cap=100) as (port, config), \
            socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as sock:
        assert closed_by_server(sock)
        wait_until(lambda: len(config.registry) == 0, HANG_GUARD_S)


def test_a_body_sent_too_slowly_is_cut_off() -> None:
    with guarded_server(header_timeout_s=0.5, cap=100) as (port, _), \
            socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
        assert closed_by_server(sock)


def test_a_kept_alive_connection_gets_a_new_deadline_per_request() -> None:
    with guarded_server(header_timeout_s=1.0, cap=100) as (port, _), \
            socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET / HTTP/1.1\r\n")  # the next request, never finished
        assert closed_by_server(sock)


def test_past_the_cap_the_oldest_idle_connection_goes_and_a_fresh_one_is_served() -> None:
    cap = 16
    with guarded_server(header_timeout_s=60.0, cap=cap) as (port, config):
        idle = [socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S)
                for _ in range(cap)]
        try:
            wait_until(lambda: len(config.registry) == cap, HANG_GUARD_S)
            assert get(port).startswith(b"HTTP/1.1 200")
            assert closed_by_server(idle[0])
            wait_until(lambda: len(config.registry) <= cap, HANG_GUARD_S)
        finally:
            for sock in idle:
                sock.close()
