"""Hostile media servers for the media kinds' bound tests: a server that never ends its
answer (Endless), one answer per test from a handler (Hostile), and how the probe's RSS and the
bytes a server sent are read."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import psutil
import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import SingleProfile
from sustain.probes.measure.sample import Measurement
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload

MiB = 1024 * 1024


CHUNK = bytes(MiB)
SOCKET_SLACK = 32 * MiB
"""Bytes the server may have written past what the client read: the sockets' buffers."""
RSS_GROWTH = 48 * MiB
"""What reading one bounded answer may add to the probe's RSS (its buffers, the allocator's
arenas): far below the 64 MiB and 512 MiB it read."""
LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def rss() -> int:
    """Resident bytes, after handing back what the allocator holds free."""
    gc.collect()
    LIBC.malloc_trim(0)
    return int(psutil.Process().memory_info().rss)


@dataclass
class Endless:
    """A hostile media server on this event loop: what it sent, per route."""

    port: int = 0
    sent: int = 0
    """Body bytes written to the client before it went away."""
    cap: int = 0
    """The most the server writes of one body: the load loop's bound."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = next((int(line.split(":", 1)[1]) for line in lines
                               if line.lower().startswith("content-length:")), 0)
                body = await reader.readexactly(length)
                await self.answer(method, path, body, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def answer(self, method: str, path: str, request: bytes,
                     writer: asyncio.StreamWriter) -> None:
        if path.endswith("/audio/speech") and b'"response_format":"wav"' in request:
            # a WAV head whose first chunk claims 2 GiB: its audio never comes
            await self.endless(writer, b"audio/wav", chunked=True, prefix=b"RIFF\0\0\0\0WAVE"
                               + b"LIST" + (2**31).to_bytes(4, "little"))
        elif path.endswith("/audio/speech"):
            await self.endless(writer, b"audio/pcm", chunked=True)
        elif path.endswith("/content"):
            await self.endless(writer, b"video/mp4", chunked=False)
        else:  # a video job: queued when created, completed when polled
            status = "queued" if method == "POST" else "completed"
            body = json.dumps({"id": "video_endless", "status": status}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()

    async def endless(self, writer: asyncio.StreamWriter, media: bytes, *, chunked: bool,
                      prefix: bytes = b"") -> None:
        """A 200 whose body never ends (up to `cap`, the loop's bound)."""
        framing = b"transfer-encoding: chunked" if chunked else \
            b"content-length: " + str(1 << 40).encode()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: " + media + b"\r\n" + framing
                     + b"\r\n\r\n")
        self.sent = 0
        pieces = [prefix, CHUNK] if prefix else [CHUNK]
        while self.sent < self.cap:
            for piece in pieces:
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                self.sent += len(piece)
            pieces = [CHUNK]
            await writer.drain()  # raises once the client has gone
        raise ConnectionError("the bound of the test's own loop")


async def measure(target: Target, workload: Workload) -> tuple[Measurement, int]:
    """One request's measurement, and how much the probe's RSS grew for it."""
    async with HttpClients() as clients:
        before = rss()
        result = await execute(clients, target, workload, SingleProfile())
        grown = rss() - before
    (sample,) = result.samples
    return sample.measurement, grown



# --- hostile media servers, one answer per test ------------------------------------------------

Handler = Callable[["Conn"], Awaitable[None]]
"""What a hostile server answers to one request: it writes through `conn` (its own bound on
what it writes is the test's load loop's)."""


@dataclass
class Conn:
    """One request a hostile server received, and its connection."""

    method: str
    path: str
    body: bytes
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    server: Hostile

    def head(self, content_type: bytes, *, status: bytes = b"200 OK",
             length: int | None = None, extra: bytes = b"") -> None:
        """A response head: chunked framing unless a content `length` is given."""
        framing = b"transfer-encoding: chunked" if length is None else \
            b"content-length: " + str(length).encode()
        self.writer.write(b"HTTP/1.1 " + status + b"\r\ncontent-type: " + content_type
                          + b"\r\n" + extra + framing + b"\r\n\r\n")

    async def send(self, data: bytes, *, chunked: bool = True) -> None:
        """Body bytes (one chunk of a chunked body, unless `chunked` is False), counted and
        flushed: raises ConnectionError once the client went away."""
        self.writer.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        self.server.sent += len(data)
        await self.writer.drain()

    async def end(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()

    async def json(self, payload: Any, *, status: bytes = b"200 OK",
                   extra: bytes = b"") -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.head(b"application/json", status=status, length=len(body), extra=extra)
        await self.send(body, chunked=False)


@dataclass
class Hostile:
    """A hostile endpoint on this event loop: `handler` answers every request; what it got,
    what it sent and whether the client went away before the server's own bound are
    counted."""

    handler: Handler
    port: int = 0
    requests: list[tuple[str, str]] = field(default_factory=list)
    sent: int = 0
    """Body bytes written to the client."""
    cut_off: int = 0
    """Answers the client went away from before the server was done with them."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = next((int(line.split(":", 1)[1]) for line in lines
                               if line.lower().startswith("content-length:")), 0)
                body = await reader.readexactly(length)
                self.requests.append((method, path))
                try:
                    await self.handler(Conn(method, path, body, reader, writer, self))
                except ConnectionError:
                    self.cut_off += 1
                    raise
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def hostile(handler: Handler) -> AsyncIterator[Hostile]:
    server = Hostile(handler)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield server
        listener.close()


async def cut_off(server: Hostile, bound_s: float = 10.0) -> int:
    """The answers the client went away from, once the server noticed (it notices at its
    next write), waiting at most `bound_s`."""
    for _ in range(round(bound_s / 0.05)):
        if server.cut_off:
            break
        await asyncio.sleep(0.05)
    return server.cut_off


async def one(server: Hostile, kind: ApiKind, workload: Workload, http2: bool,
              **target: Any) -> Measurement:
    """One sample of `kind` against `server`; a raise here is a lost sample."""
    async with HttpClients() as clients:
        result = await execute(clients, Target(base_url=server.base_url, api_kind=kind,
                                               model="m", http2=http2, **target),
                               workload, SingleProfile())
    (sample,) = result.samples
    return sample.measurement


TRANSPORTS = pytest.mark.parametrize("http2", [False, True], ids=["lean-http1", "httpx"])
