"""Media answers that never end: a speech server streaming audio without end, a video server
whose job's content has no end, a speech server whose WAV never reaches its audio. Each is cut
off at its kind's bound (speech: 64 MiB of body; a video's content: 512 MiB), classified as
`protocol`, and read without being kept: the probe's RSS grows by far less than what it read,
and the server sent at most the bound plus what the sockets buffer. Through both transports
(the lean HTTP/1.1 pool and httpx)."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import psutil
import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import SingleProfile
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.openai_speech import MAX_SPEECH_BYTES
from sustain.probes.protocols.openai_videos import MAX_VIDEO_BYTES
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


@pytest.fixture
async def endless() -> AsyncIterator[Endless]:
    server = Endless()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield server
        listener.close()


async def measure(target: Target, workload: Workload) -> tuple[Measurement, int]:
    """One request's measurement, and how much the probe's RSS grew for it."""
    async with HttpClients() as clients:
        before = rss()
        result = await execute(clients, target, workload, SingleProfile())
        grown = rss() - before
    (sample,) = result.samples
    return sample.measurement, grown


@pytest.mark.parametrize("http2", [False, True], ids=["lean-http1", "httpx"])
async def test_endless_speech_is_cut_off_at_its_bound_and_never_kept(
        endless: Endless, http2: bool) -> None:
    endless.cap = MAX_SPEECH_BYTES + 4 * SOCKET_SLACK
    target = Target(base_url=endless.base_url, api_kind=ApiKind.OPENAI_SPEECH, model="m",
                    http2=http2, timeout_total_s=120)
    m, grown = await measure(target, Workload(prompt="speak"))
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == "streamed body over 64 MiB"
    assert m.audio_s == pytest.approx(MAX_SPEECH_BYTES / 48_000)  # counted up to the bound
    assert MAX_SPEECH_BYTES < endless.sent <= MAX_SPEECH_BYTES + SOCKET_SLACK
    assert grown < RSS_GROWTH


async def test_a_wav_that_never_reaches_its_audio_is_cut_off_after_its_header_bound(
        endless: Endless) -> None:
    endless.cap = 4 * SOCKET_SLACK
    target = Target(base_url=endless.base_url, api_kind=ApiKind.OPENAI_SPEECH, model="m",
                    timeout_total_s=60)
    m, grown = await measure(target, Workload(prompt="speak", audio_format="wav"))
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == "no WAV data chunk in the first 4 KiB"
    assert endless.sent <= SOCKET_SLACK
    assert grown < RSS_GROWTH


@pytest.mark.parametrize("http2", [False, True], ids=["lean-http1", "httpx"])
async def test_an_endless_video_is_cut_off_at_its_bound_and_never_kept(
        endless: Endless, http2: bool) -> None:
    endless.cap = MAX_VIDEO_BYTES + 4 * SOCKET_SLACK
    target = Target(base_url=endless.base_url, api_kind=ApiKind.OPENAI_VIDEOS, model="m",
                    http2=http2, timeout_total_s=120)
    m, grown = await measure(target, Workload(prompt="film", poll_interval_s=0.05))
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == "response body over 512 MiB"
    assert m.phases_ms is None
    assert MAX_VIDEO_BYTES < endless.sent <= MAX_VIDEO_BYTES + SOCKET_SLACK
    assert grown < RSS_GROWTH
