"""Request heads beyond SUSTAIN_HTTP_MAX_HEAD_BYTES: the attack was a 200 MB head of 1 KB
header lines to /healthz, read whole and answered 200 (ten at once: 2.3 GB of RSS). Now the
guarded protocol counts a head's bytes as they arrive and, past the cap, answers 431 and
closes the connection without reading the rest. Real uvicorn on loopback; what is asserted is
bytes, statuses and RSS, never a time."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import psutil

from sustain.service.config import Settings
from sustain.service.http_protocol import guarded_config
from tests.integration.service.test_http_protocol import (
    HANG_GUARD_S,
    get,
    guarded_server,
    tiny_app,
)

CAP = 64 * 1024
"""The head cap of these servers (the default of SUSTAIN_HTTP_MAX_HEAD_BYTES)."""
LINE = b"X-Filler: " + b"a" * 1000 + b"\r\n"
"""One 1 KB header line, as the attack sent them."""
BLOCK = LINE * 64
"""What the client sends at a time (64 KB)."""
MB = 1024 * 1024


def send_head(port: int, head_bytes: int, start: bytes = b"GET /healthz HTTP/1.1\r\n"
              b"Host: x\r\n") -> tuple[int, bytes]:
    """Send `start`, then about `head_bytes` of header lines and the empty line that ends the
    head, stopping when the server closes; the bytes the client got into its socket before
    that, and the server's answer."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as sock:
        try:
            sock.sendall(start)
            sent += len(start)
            while sent < head_bytes:
                sock.sendall(BLOCK)
                sent += len(BLOCK)
            sock.sendall(b"\r\n")
        except OSError:  # closed (reset, broken pipe) or no longer read (timeout)
            pass
        return sent, read_answer(sock)


def read_answer(sock: socket.socket) -> bytes:
    """Everything the server wrote before it closed (a reset after the answer ends it)."""
    answer = b""
    sock.settimeout(HANG_GUARD_S)
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except OSError:
        pass
    return answer


@contextmanager
def peak_rss() -> Iterator[list[int]]:
    """The highest RSS of this process (where the server runs, in a thread) while the block
    runs, sampled every few milliseconds, in `found[0]`."""
    process = psutil.Process()
    found = [process.memory_info().rss]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.005):
            found[0] = max(found[0], process.memory_info().rss)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield found
    finally:
        done.set()
        watcher.join()
        found[0] = max(found[0], process.memory_info().rss)


def test_a_head_beyond_the_cap_is_431_and_the_rest_is_never_read() -> None:
    with guarded_server(header_timeout_s=30.0, cap=100, max_head_bytes=CAP) as (port, _):
        sent, answer = send_head(port, 20 * MB)
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
        assert b"connection: close" in answer.lower()
        # what the client got into its sockets before the server closed is the cap plus
        # socket buffers (a few MB on loopback), never the 20 MB it meant to send
        assert sent < 10 * MB, sent
        assert get(port, "/healthz").startswith(b"HTTP/1.1 200")


def test_a_huge_request_line_is_431() -> None:
    with guarded_server(header_timeout_s=30.0, cap=100, max_head_bytes=CAP) as (port, _):
        url = b"/healthz?" + b"q" * (2 * MB)
        with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as sock:
            with suppress(OSError):  # closed before all of it was sent
                sock.sendall(b"GET " + url + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_answer(sock).startswith(b"HTTP/1.1 431 ")


def test_a_single_huge_header_is_431() -> None:
    with guarded_server(header_timeout_s=30.0, cap=100, max_head_bytes=CAP) as (port, _), \
            socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as sock:
        with suppress(OSError):  # closed before all of it was sent
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * (2 * MB)
                         + b"\r\n\r\n")
        assert read_answer(sock).startswith(b"HTTP/1.1 431 ")


def test_heads_within_the_cap_are_served_each_on_its_own_count() -> None:
    """Two heads of 40 KB on one kept-alive connection (80 KB together, over the cap), and a
    small head whose body arrives in the same write: all 200."""
    with guarded_server(header_timeout_s=30.0, cap=100, max_head_bytes=CAP) as (port, _), \
            socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as sock:
        head = b"GET / HTTP/1.1\r\nHost: x\r\n" + LINE * 40 + b"\r\n"
        for _ in range(2):
            sock.sendall(head)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        body = b"z" * (512 * 1024)  # one write far beyond the cap, whose head is small
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")


def test_ten_huge_heads_at_once_leave_the_server_memory_flat() -> None:
    """Ten parallel 20 MB heads: the server's RSS (this process: it runs in a thread) grows by
    far less than the 200 MB they carry; without the cap each was held whole."""
    with guarded_server(header_timeout_s=30.0, cap=100, max_head_bytes=CAP) as (port, _):
        answers: list[tuple[int, bytes]] = []
        with peak_rss() as peak:
            baseline = psutil.Process().memory_info().rss
            clients = [threading.Thread(target=lambda: answers.append(send_head(port, 20 * MB)))
                       for _ in range(10)]
            for client in clients:
                client.start()
            for client in clients:
                client.join()
        grew = peak[0] - baseline
        print(f"ten 20 MB heads: peak RSS +{grew / MB:.1f} MB, "
              f"client sent {sum(sent for sent, _ in answers) / MB:.1f} MB in all")
        assert grew < 64 * MB, grew
        assert len(answers) == 10
        assert all(answer.startswith(b"HTTP/1.1 431 ") for _, answer in answers), \
            [answer[:40] for _, answer in answers]
        assert get(port, "/healthz").startswith(b"HTTP/1.1 200")


def test_serve_takes_the_head_cap_and_write_deadline_from_the_settings() -> None:
    config = guarded_config(tiny_app, Settings(http_max_head_bytes=8192,
                                               export_write_timeout_s=7.5))
    assert config.max_head_bytes == 8192
    assert config.write_timeout_s == 7.5
