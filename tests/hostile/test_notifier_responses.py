"""A notifier's receiver answers what it likes: one answered a notification with a 600 MiB
gzip bomb, and the service, which read answers whole and decoded them, went from 236 MB to
1.4 GB. Now the request asks for the identity encoding, the answer is read raw (never
decompressed, whatever it claims) up to SUSTAIN_NOTIFY_MAX_RESPONSE_BYTES and the connection
closed, and the status code alone decides the outcome."""

from __future__ import annotations

import socket
import struct
import threading
import zlib
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from sustain.service.app import create_app, runtime_of
from sustain.service.db import alerts as alert_queries
from sustain.service.evaluation.candidates import Candidate
from tests.integration.service.helpers import app_settings, serving
from tests.receivers import Receiver

MiB = 1024 * 1024
BOMB_ZEROS = 1024 * MiB
"""What the bomb's deflated part inflates to: 1 GiB of zeros, about 1 MiB on the wire."""
ANSWER_BYTES = 64 * MiB
"""The whole answer on the wire: the deflated gigabyte, then stored (uncompressed) blocks of
the same gzip member, so a client that reads an answer whole shows in the bytes sent too."""
MAX_SENT = 16 * MiB
"""What the receiver may get off before the client hangs up: the 64 KiB read, and what the
two sockets' buffers take in meanwhile (a few MiB on loopback)."""
MAX_GROWTH = 100 * MiB
"""How much the test process's peak RSS may grow while the bomb is delivered: far below the
1 GiB it inflates to (the app, the receiver and the client all run in this process)."""
LABELS = {"alertname": "SustainEndpointDown", "probe": "chat", "severity": "page"}
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
STORED_MAX = 65535
"""Bytes of one stored deflate block."""


def gzip_bomb(zeros: int, size: int) -> Iterator[bytes]:
    """One gzip member of `size` bytes on the wire, all zeros inside: `zeros` of them (a
    multiple of 1 MiB) deflated, then stored blocks up to `size`. Made without holding or
    compressing it all: after a full flush deflate starts afresh and byte-aligned, so every
    1 MiB of zeros compresses to the same block, and a stored block can follow any of them."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    one = bytes(MiB)
    block = deflate.compress(one) + deflate.flush(zlib.Z_FULL_FLUSH)
    final = deflate.flush(zlib.Z_FINISH)  # an empty last block
    yield GZIP_HEADER
    for _ in range(zeros // MiB):
        yield block
    sent = len(GZIP_HEADER) + zeros // MiB * len(block)
    stored = bytes(STORED_MAX)
    inflated = zeros
    while (room := size - sent - len(final) - 8 - 5) > 0:
        n = min(STORED_MAX, room)
        yield b"\x00" + struct.pack("<HH", n, n ^ 0xFFFF) + stored[:n]
        sent += 5 + n
        inflated += n
    crc = 0
    for start in range(0, inflated, MiB):
        crc = zlib.crc32(one[:min(MiB, inflated - start)], crc)
    yield final + struct.pack("<II", crc, inflated & 0xFFFFFFFF)


class BombReceiver:
    """A receiver on a loopback port, on its own thread, that answers every request 200 with
    Content-Encoding: gzip and a body of `ANSWER_BYTES` starting with a gzip bomb; it counts
    the bytes of each answer it got into the socket before the client hung up. With `stall`,
    it sends the first block of the bomb and then nothing more until the client hangs up."""

    def __init__(self, *, stall: bool = False) -> None:
        self.stall = stall
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)  # so that it sees _stop soon
        self._stop = threading.Event()
        self.port = int(self._listener.getsockname()[1])
        self.requests: list[bytes] = []
        """The head of each request."""
        self.sent: list[int] = []
        """Body bytes sent of each answer, when it ended."""
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="bomb-receiver",
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(10)
                self._answer(connection)
            self.ended.set()

    def _answer(self, connection: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            if not (got := connection.recv(65536)):
                return
            head += got
        head, _, body = head.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            body += connection.recv(65536)
        self.requests.append(head)
        sent = 0
        try:
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               b"Content-Encoding: gzip\r\n"
                               b"Content-Length: %d\r\n\r\n" % ANSWER_BYTES)
            for chunk in gzip_bomb(BOMB_ZEROS, ANSWER_BYTES):
                connection.sendall(chunk)
                sent += len(chunk)
                if self.stall:
                    connection.recv(1)  # until the client hangs up
                    break
        except OSError:
            pass  # the client hung up: what we want
        self.sent.append(sent)
    def __enter__(self) -> BombReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._listener.close()


def _kib(line: str) -> int:
    return int(line.split()[1]) * 1024


def reset_peak_rss() -> int:
    """Reset this process's peak RSS (VmHWM) to its RSS now, and return it in bytes."""
    Path("/proc/self/clear_refs").write_text("5")
    return peak_rss()


def peak_rss() -> int:
    """This process's peak RSS since the last reset, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return _kib(line)
    raise AssertionError("no VmHWM in /proc/self/status")


@pytest.fixture
def app(database_url: str) -> FastAPI:
    """The app's own delivery worker waits a minute between passes: each test drives a pass
    of it (with the settings the service gives it)."""
    return create_app(app_settings(database_url, auto_migrate=False,
                                   notify_poll_s=60, alert_evaluation_s=3600))


@pytest.fixture
async def api(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(app) as client:
        yield client


async def fire(app: FastAPI, labels: dict[str, str]) -> None:
    candidate = Candidate(labels=labels, condition=True, annotations={"summary": "down"})
    async with runtime_of(app).sessions.begin() as session:
        assert await alert_queries.advance(session, candidate, datetime.now(UTC),
                                           timedelta(0), None, "r1") == "firing"


async def deliveries(api: httpx.AsyncClient) -> list[tuple[str, int, int | None]]:
    log: list[dict[str, Any]] = (await api.get("/api/v1/deliveries")).json()["items"]
    return [(d["state"], d["attempts"], d["last_status"]) for d in log]


async def test_a_gzip_bomb_answer_is_read_raw_and_bounded_never_inflated(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    with BombReceiver() as bomb:
        r = await api.post("/api/v1/notifiers", json={
            "name": "bomb", "kind": "webhook", "url": bomb.url, "timeout_s": 10})
        assert r.status_code == 201, r.text
        await fire(app, LABELS)
        before = reset_peak_rss()
        await runtime_of(app).delivery.drain()
        growth = peak_rss() - before
        assert bomb.ended.wait(10), "the client never hung up"

    assert growth < MAX_GROWTH, f"peak RSS grew {growth / MiB:.0f} MiB"
    (sent,) = bomb.sent
    assert sent < MAX_SENT, f"the receiver got {sent / MiB:.1f} MiB of its answer off"
    (head,) = bomb.requests
    assert b"accept-encoding: identity" in head.lower()
    # The status code decides: the notification was delivered, once.
    assert await deliveries(api) == [("delivered", 1, 200)]


async def test_a_plain_receiver_still_gets_its_notification(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    with Receiver() as receiver:
        r = await api.post("/api/v1/notifiers", json={
            "name": "plain", "kind": "webhook", "url": f"{receiver.url}/hook", "timeout_s": 5})
        assert r.status_code == 201, r.text
        await fire(app, LABELS)
        await runtime_of(app).delivery.drain()
        (got,) = receiver.answered("/hook")
    assert got.json()["alert"]["labels"] == LABELS
    assert got.headers["accept-encoding"] == "identity"
    assert await deliveries(api) == [("delivered", 1, 200)]


async def test_the_status_alone_decides_a_200_whose_body_stalls_is_delivered_once(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    with BombReceiver(stall=True) as stalling:
        r = await api.post("/api/v1/notifiers", json={
            "name": "stalling", "kind": "webhook", "url": stalling.url, "timeout_s": 1})
        assert r.status_code == 201, r.text
        await fire(app, LABELS)
        await runtime_of(app).delivery.drain()
        assert stalling.ended.wait(10), "the client never hung up"
    assert len(stalling.requests) == 1, "not sent again"
    assert await deliveries(api) == [("delivered", 1, 200)]
