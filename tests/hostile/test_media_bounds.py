"""Media answers that never end: a speech server streaming audio without end, a video server
whose job's content has no end, a speech server whose WAV never reaches its audio. Each is cut
off at its kind's bound (speech: 64 MiB of body; a video's content: 512 MiB), classified as
`protocol`, and read without being kept: the probe's RSS grows by far less than what it read,
and the server sent at most the bound plus what the sockets buffer. Through both transports
(the lean HTTP/1.1 pool and httpx)."""

from __future__ import annotations

import asyncio
import base64
import ctypes
import ctypes.util
import gc
import json
import struct
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import psutil
import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import SingleProfile
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.base import raw_reader
from sustain.probes.protocols.openai_speech import (
    MAX_SPEECH_BYTES,
    WAV_HEADER_LIMIT,
    SpeechStream,
)
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


# --- speech ----------------------------------------------------------------------------------


@TRANSPORTS
async def test_a_speech_stream_trickled_a_byte_at_a_time_ends_at_the_total_timeout(
        http2: bool) -> None:
    async def trickle(conn: Conn) -> None:
        conn.head(b"audio/pcm")
        for _ in range(200):  # the load loop's bound: 10 s
            await conn.send(b"\0")
            await asyncio.sleep(0.05)
        await conn.end()

    async with hostile(trickle) as server:
        m = await one(server, ApiKind.OPENAI_SPEECH, Workload(prompt="speak"), http2,
                      timeout_total_s=1.0)
        assert await cut_off(server) == 1  # the probe went away before the server's bound
    assert (m.error_class, m.error_detail) == (ErrorClass.TIMEOUT_TOTAL, "deadline exceeded")
    assert m.ttft_ms is not None  # its first byte came: the total deadline, not the first
    assert server.sent < 200


def wav(rate: int, channels: int, bits: int, *, fmt_size: int = 16,
        data_size: int = 0xFFFFFFFF) -> bytes:
    """A WAV head whose `fmt ` chunk claims `rate`, `channels` and `bits`."""
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * channels * bits // 8 & 0xFFFFFFFF,
                      channels * bits // 8 & 0xFFFF, bits)
    return (b"RIFF\xff\xff\xff\xffWAVE" + b"fmt " + struct.pack("<I", fmt_size) + fmt
            + b"data" + struct.pack("<I", data_size))


def speaks(head: bytes, audio: bytes, content_type: bytes = b"audio/wav") -> Handler:
    async def answer(conn: Conn) -> None:
        conn.head(content_type)
        if head:
            await conn.send(head)
        await conn.send(audio)
        await conn.end()
    return answer


@pytest.mark.parametrize(("rate", "channels", "bits", "fmt_size"), [
    (0, 1, 16, 16), (24_000, 0, 16, 16), (24_000, 1, 0, 16),
    (0xFFFFFFFF, 0xFFFF, 0xFFFF, 16), (24_000, 1, 16, 2)],
    ids=["no-rate", "no-channels", "no-bits", "absurd", "short-fmt"])
async def test_a_wav_head_claiming_an_impossible_format_is_protocol(
        rate: int, channels: int, bits: int, fmt_size: int) -> None:
    async with hostile(speaks(wav(rate, channels, bits, fmt_size=fmt_size),
                              bytes(48_000))) as server:
        m = await one(server, ApiKind.OPENAI_SPEECH,
                      Workload(prompt="speak", audio_format="wav"), False)
    assert m.error_class is ErrorClass.PROTOCOL
    assert str(m.error_detail).startswith("WAV fmt chunk")
    assert m.audio_s is None
    assert m.rtf is None


@pytest.mark.parametrize(("rate", "channels", "bits", "data_size"), [
    (24_000, 1, 16, 10), (24_000, 1, 16, 0), (8_000, 2, 24, 1 << 31), (192_000, 8, 32, 0)])
async def test_a_wav_head_that_lies_about_its_data_size_is_read_by_its_body(
        rate: int, channels: int, bits: int, data_size: int) -> None:
    per_s = rate * channels * bits // 8
    async with hostile(speaks(wav(rate, channels, bits, data_size=data_size),
                              bytes(per_s // 2))) as server:
        m = await one(server, ApiKind.OPENAI_SPEECH,
                      Workload(prompt="speak", audio_format="wav"), False)
    assert m.error_class is None
    assert m.audio_s == pytest.approx(0.5)


def test_a_wav_head_is_read_once_and_held_within_its_bound_however_it_arrives() -> None:
    """A head of 4 KiB of empty chunks: a byte a read, each chunk header is read once (a
    re-scan from the start at every read costs the loop quadratic time); in one read of
    1 MiB, no more than the bound is held or scanned."""
    junk = b"RIFF\0\0\0\0WAVE" + b"JUNK\0\0\0\0" * (WAV_HEADER_LIMIT // 8)
    trickled = SpeechStream(request=b'{"response_format":"wav"}')
    assert raw_reader(trickled, "audio/wav") is trickled
    baseline = SpeechStream(request=b'{"response_format":"pcm"}')
    assert raw_reader(baseline, "audio/pcm") is baseline
    cpu_s = []
    for state in (baseline, trickled):
        started = time.thread_time()
        for k in range(len(junk)):
            state.on_bytes(junk[k:k + 1], k)
        cpu_s.append(time.thread_time() - started)
    assert trickled.failure is ErrorClass.PROTOCOL
    # as much work a byte as counting pcm, within a wide margin (a re-scan is ~500 times it)
    assert cpu_s[1] < 25 * max(cpu_s[0], 1e-4)
    whole = SpeechStream(request=b'{"response_format":"wav"}')
    assert raw_reader(whole, "audio/wav") is whole
    whole.on_bytes(junk + b"JUNK\0\0\0\0" * (MiB // 8), 1)
    assert (whole.failure, whole.detail) == (ErrorClass.PROTOCOL,
                                             "no WAV data chunk in the first 4 KiB")
    assert whole.wav is None  # what it held is let go with the answer's failure


@TRANSPORTS
@pytest.mark.parametrize("content_type", [
    b"audio/L16; rate=0", b"audio/L16; rate=-8000", b"audio/L16; rate=8k",
    b"audio/L16; rate=\xb2", b"audio/L16; rate=" + b"9" * 400,
    b"audio/L16; rate=" + b"9" * 5000, b"audio/pcm; channels=" + b"9" * 400,
    b"audio/pcm; rate=24000; channels=0"],
    ids=["zero", "negative", "not-a-number", "superscript-digit", "overflows-a-float",
         "past-int-digits", "channels-overflow", "no-channels"])
async def test_a_pcm_type_whose_rate_or_channels_is_no_number_is_protocol(
        content_type: bytes, http2: bool) -> None:
    async with hostile(speaks(b"", bytes(4_800), content_type)) as server:
        m = await one(server, ApiKind.OPENAI_SPEECH, Workload(prompt="speak"), http2)
    assert m.error_class is ErrorClass.PROTOCOL
    assert "audio/" in str(m.error_detail)
    assert m.audio_s is None


@TRANSPORTS
async def test_a_pcm_type_with_a_real_rate_and_channels_is_read_by_them(http2: bool) -> None:
    async with hostile(speaks(b"", bytes(6_400),
                              b"audio/L16; rate=16000; channels=2")) as server:
        m = await one(server, ApiKind.OPENAI_SPEECH, Workload(prompt="speak"), http2)
    assert m.error_class is None
    assert m.audio_s == pytest.approx(0.1)


@TRANSPORTS
async def test_a_100_mb_speech_delta_is_refused_at_the_event_cap_without_being_held(
        http2: bool) -> None:
    async def huge_delta(conn: Conn) -> None:
        conn.head(b"text/event-stream")
        await conn.send(b'data: {"type":"speech.audio.delta","audio":"')
        for _ in range(100):  # the load loop's bound: 100 MiB
            await conn.send(b"A" * MiB)
        await conn.send(b'"}\n\n')
        await conn.end()

    async with hostile(huge_delta) as server:
        before = rss()
        m = await one(server, ApiKind.OPENAI_SPEECH,
                      Workload(prompt="speak", stream_format="sse"), http2)
        grown = rss() - before
    assert (m.error_class, m.error_detail) == (ErrorClass.PROTOCOL,
                                               "server-sent event line over 1 MiB")
    assert server.sent <= MiB + SOCKET_SLACK
    assert grown < RSS_GROWTH


def delta_events(count: int) -> bytes:
    return b'data: {"type":"speech.audio.delta","audio":"AAAA"}\n\n' * count


@TRANSPORTS
async def test_a_speech_stream_of_a_million_tiny_deltas_ends_at_the_piece_bound(
        http2: bool) -> None:
    async def tiny_deltas(conn: Conn) -> None:
        conn.head(b"text/event-stream")
        for _ in range(250):  # the load loop's bound: a million deltas
            await conn.send(delta_events(4096))
        await conn.send(b'data: {"type":"speech.audio.done"}\n\n')
        await conn.end()

    async with hostile(tiny_deltas) as server:
        m = await one(server, ApiKind.OPENAI_SPEECH,
                      Workload(prompt="speak", stream_format="sse"), http2)
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == "speech stream in over 131072 pieces"
    assert len(m.itl_ms) < 131_072


@TRANSPORTS
async def test_raw_speech_in_a_million_one_byte_chunks_ends_at_the_piece_bound(
        http2: bool) -> None:
    """Each chunk is a piece of audio, an ITL gap held: past the bound on pieces, the answer is
    `protocol`, so the ITL list, the probe's memory, is bounded."""
    pieces = 1 << 21

    async def crumbs(conn: Conn) -> None:
        conn.head(b"audio/pcm")
        crumb = b"1\r\n\0\r\n" * 65_536
        for _ in range(pieces // 65_536):
            conn.writer.write(crumb)
            conn.server.sent += 65_536
            await conn.writer.drain()
        await conn.end()

    async with hostile(crumbs) as server:
        before = rss()
        m = await one(server, ApiKind.OPENAI_SPEECH, Workload(prompt="speak"), http2)
        grown = rss() - before
    assert (m.error_class, m.error_detail) == (ErrorClass.PROTOCOL,
                                               "speech stream in over 131072 pieces")
    assert len(m.itl_ms) < 131_072
    assert m.audio_s == pytest.approx(131_072 / 48_000)  # counted up to the bound
    assert grown < RSS_GROWTH


# --- images ----------------------------------------------------------------------------------


PARTIAL = b"event: image_generation.partial_image\ndata: x\n\n"
COMPLETED = b'data: {"type":"image_generation.completed","b64_json":"x"}\n\n'


@TRANSPORTS
async def test_a_flood_of_partial_images_ends_at_the_image_bound(http2: bool) -> None:
    async def partials(conn: Conn) -> None:
        conn.head(b"text/event-stream")
        for _ in range(1000):  # the load loop's bound: 4,096,000 partial images
            await conn.send(PARTIAL * 4096)
        await conn.send(COMPLETED)
        await conn.end()

    async with hostile(partials) as server:
        m = await one(server, ApiKind.OPENAI_IMAGES, Workload(prompt="draw", stream=True),
                      http2)
        assert await cut_off(server) == 1
    assert (m.error_class, m.error_detail) == (ErrorClass.PROTOCOL,
                                               "image stream over 1024 images")
    assert m.items is None
    assert len(m.itl_ms) < 1024


@TRANSPORTS
async def test_an_endless_image_stream_of_large_partials_ends_at_its_byte_bound(
        http2: bool) -> None:
    async def large_partials(conn: Conn) -> None:
        conn.head(b"text/event-stream")
        event = b"event: image_generation.partial_image\ndata: " + b"A" * MiB + b"\n\n"
        for _ in range(600):  # the load loop's bound: 600 MiB
            await conn.send(event)
        await conn.end()

    async with hostile(large_partials) as server:
        m = await one(server, ApiKind.OPENAI_IMAGES, Workload(prompt="draw", stream=True),
                      http2, timeout_total_s=120)
    assert (m.error_class, m.error_detail) == (ErrorClass.PROTOCOL,
                                               "image stream over 256 MiB")
    assert server.sent <= 256 * MiB + 2 * MiB + SOCKET_SLACK


def image_answer(item: bytes, count: int) -> bytes:
    return b'{"data":[' + b",".join([item] * count) + b']}'


@TRANSPORTS
@pytest.mark.parametrize(("body", "detail"), [
    (image_answer(b'{"url":"a"}', 5_500_000), "image answer of over 65536 JSON values"),
    (image_answer(b"0", 10_000_000), "image answer of over 65536 JSON values"),
    (image_answer(b'{"url":"a"}', 2_000), "image answer of over 1024 images")],
    ids=["5.5M-images", "10M-numbers", "2000-images"])
async def test_a_whole_image_answer_of_millions_of_entries_is_refused_before_parsing(
        body: bytes, detail: str, http2: bool) -> None:
    async def whole(conn: Conn) -> None:
        await conn.json(body)

    async with hostile(whole) as server:
        tracemalloc.start()
        m = await one(server, ApiKind.OPENAI_IMAGES, Workload(prompt="draw"), http2)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert (m.error_class, m.error_detail) == (ErrorClass.PROTOCOL, detail)
    assert m.items is None
    # the body, as read and as joined, and no parse of it: 5.5M objects would be 1.3 GB
    assert peak < 3 * len(body) + 16 * MiB


# --- video jobs ------------------------------------------------------------------------------


def job_server(create: Any, poll: Any = None, *, content: Handler | None = None,
               delete: Handler | None = None) -> Handler:
    """A video job server: `create` answers the POST, `poll` (a value, or a list cycled
    through) each GET of the job; the content is three bytes unless `content` says."""
    polls = poll if isinstance(poll, list) else [poll]

    async def answer(conn: Conn) -> None:
        if conn.method == "POST":
            await conn.json(create)
        elif conn.method == "DELETE":
            await (delete(conn) if delete is not None else conn.json({"deleted": True}))
        elif conn.path.endswith("/content"):
            if content is not None:
                await content(conn)
            else:
                conn.head(b"video/mp4", length=3)
                await conn.send(b"mp4", chunked=False)
        else:
            gets = sum(method == "GET" for method, _ in conn.server.requests)
            await conn.json(polls[(gets - 1) % len(polls)])
    return answer


FILM = Workload(prompt="film", poll_interval_s=0.05)


@TRANSPORTS
@pytest.mark.parametrize("job_id", [
    None, 5, "", "..", ".", "a\n", "../content", "a?b=1", "a/b", "x" * 10_000, "a%2F..",
    "a#b"], ids=["missing", "number", "empty", "dot-dot", "dot", "trailing-newline",
                 "traversal", "query", "slash", "10k", "escaped", "fragment"])
async def test_a_job_id_that_is_no_path_segment_is_protocol_and_never_requested(
        job_id: Any, http2: bool) -> None:
    created = {"status": "queued"} if job_id is None else {"id": job_id, "status": "queued"}
    async with hostile(job_server(created, {"status": "completed"})) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert (m.error_class, m.error_detail) == (ErrorClass.PROTOCOL,
                                               "the job has no usable id")
    assert server.requests == [("POST", "/v1/videos")]  # no poll, no DELETE, anywhere


@TRANSPORTS
@pytest.mark.parametrize("status", [[], {"a": 1}, 1.5, None, True, "QUEUED", "x" * 10_000],
                         ids=["list", "object", "number", "null", "bool", "upper", "10k"])
@pytest.mark.parametrize("when", ["creating", "polling"])
async def test_a_job_status_that_is_not_the_protocols_is_protocol(
        status: Any, when: str, http2: bool) -> None:
    created = {"id": "video_1", "status": status if when == "creating" else "queued"}
    async with hostile(job_server(created, {"id": "video_1", "status": status})) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert m.error_class is ErrorClass.PROTOCOL
    assert str(m.error_detail).startswith("job status ")
    assert len(str(m.error_detail)) < 100
    if when == "polling":  # a job given up is cancelled
        assert server.requests == [("POST", "/v1/videos"), ("GET", "/v1/videos/video_1"),
                                   ("DELETE", "/v1/videos/video_1")]
    else:
        assert server.requests == [("POST", "/v1/videos")]


@TRANSPORTS
@pytest.mark.parametrize("progress", [b"NaN", b"1e999", b"-Infinity"])
async def test_a_job_answer_with_a_progress_that_is_no_json_number_is_protocol(
        progress: bytes, http2: bool) -> None:
    created = b'{"id":"video_1","status":"queued","progress":' + progress + b"}"
    async with hostile(job_server(created)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert m.error_class is ErrorClass.PROTOCOL
    assert server.requests == [("POST", "/v1/videos")]


@TRANSPORTS
@pytest.mark.parametrize("statuses", [["queued"], ["queued", "in_progress"],
                                      ["in_progress", "queued", "in_progress"]],
                         ids=["queued-forever", "flapping", "running-backwards"])
async def test_a_job_that_never_completes_is_polled_once_an_interval_until_the_total_timeout(
        statuses: list[str], http2: bool) -> None:
    polls = [{"id": "video_1", "status": status, "progress": k} for k, status in
             enumerate(statuses)]
    async with hostile(job_server({"id": "video_1", "status": "queued"}, polls)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=1.0)
    assert (m.error_class, m.error_detail) == (ErrorClass.TIMEOUT_TOTAL, "deadline exceeded")
    gets = [path for method, path in server.requests if method == "GET"]
    assert set(gets) == {"/v1/videos/video_1"}
    assert 2 <= len(gets) <= 1.0 / 0.05 + 2  # once an interval at most
    assert server.requests[-1] == ("DELETE", "/v1/videos/video_1")
    assert [method for method, _ in server.requests].count("DELETE") == 1


@TRANSPORTS
async def test_a_100_mb_poll_answer_is_cut_off_at_the_job_answer_bound(http2: bool) -> None:
    async def huge(conn: Conn) -> None:
        conn.head(b"application/json", length=100 * MiB)
        await conn.send(b'{"id":"video_1","status":"queued","x":"', chunked=False)
        for _ in range(100):  # the load loop's bound: 100 MiB
            await conn.send(b"A" * MiB, chunked=False)

    async with hostile(route_polls(job_server({"id": "video_1", "status": "queued"}),
                                   huge)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=30)
    assert (m.error_class, m.error_detail) == (ErrorClass.PROTOCOL, "response body over 1 MiB")
    assert server.sent <= 2 * MiB + SOCKET_SLACK
    assert server.requests[-1] == ("DELETE", "/v1/videos/video_1")


def route_polls(handler: Handler, poll: Handler) -> Handler:
    """`handler`, but for the job's polls, which `poll` answers."""
    async def answer(conn: Conn) -> None:
        if conn.method == "GET" and not conn.path.endswith("/content"):
            await poll(conn)
        else:
            await handler(conn)
    return answer


@TRANSPORTS
@pytest.mark.parametrize("status", [b"302 Found", b"307 Temporary Redirect",
                                    b"304 Not Modified"])
async def test_a_content_answer_that_redirects_is_not_a_video(status: bytes,
                                                               http2: bool) -> None:
    async def redirect(conn: Conn) -> None:
        body = b"" if status.startswith(b"304") else b"moved elsewhere"
        conn.head(b"text/plain", status=status, length=len(body),
                  extra=b"location: http://127.0.0.1:9/elsewhere.mp4\r\n")
        await conn.send(body, chunked=False)

    async with hostile(job_server({"id": "video_1", "status": "completed"},
                                  content=redirect)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == f"HTTP {status[:3].decode()} fetching the content"
    assert m.phases_ms is None
    assert server.requests[-1] == ("DELETE", "/v1/videos/video_1")


@TRANSPORTS
async def test_a_job_created_by_a_redirect_is_protocol(http2: bool) -> None:
    async def redirect(conn: Conn) -> None:
        await conn.json({"id": "video_1", "status": "queued"}, status=b"303 See Other",
                        extra=b"location: /v1/videos/video_1\r\n")

    async with hostile(redirect) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert (m.error_class, m.error_detail) == (ErrorClass.PROTOCOL,
                                               "HTTP 303 creating the job")
    assert server.requests == [("POST", "/v1/videos")]


@TRANSPORTS
async def test_a_delete_that_hangs_is_given_up_within_its_bound(http2: bool) -> None:
    given_up: list[bool] = []

    async def hang(conn: Conn) -> None:
        # the load loop's bound: 30 s; the probe going away ends it at once
        given_up.append(await asyncio.wait_for(conn.reader.read(1), timeout=30) == b"")

    async with hostile(job_server({"id": "video_1", "status": "queued"},
                                  {"id": "video_1", "status": "queued"},
                                  delete=hang)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=0.5)
    assert (m.error_class, m.error_detail) == (ErrorClass.TIMEOUT_TOTAL, "deadline exceeded")
    assert server.requests[-1] == ("DELETE", "/v1/videos/video_1")
    assert given_up == [True]  # the probe closed the DELETE's connection, not the server


@TRANSPORTS
async def test_a_whole_answer_of_ten_large_images_is_read_without_decoding_their_base64(
        http2: bool) -> None:
    """Ten images of 4.5 MiB (60 MiB of base64): counted from the body as read, their base64
    never parsed into strings on the event loop (a third copy of the body, and a parse of
    hundreds of milliseconds for every other request in flight to wait out)."""
    image = base64.b64encode(bytes(range(256)) * (4_500_000 // 256)).decode()
    body = json.dumps({"created": 1, "data": [
        {"b64_json": image, "revised_prompt": "a fox, in snow"} for _ in range(10)],
        "usage": {"input_tokens": 9, "output_tokens": 10}}).encode()

    async def whole(conn: Conn) -> None:
        await conn.json(body)

    async with hostile(whole) as server:
        tracemalloc.start()
        m = await one(server, ApiKind.OPENAI_IMAGES, Workload(prompt="draw"), http2)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert m.error_class is None
    assert (m.items, m.output_tokens, m.input_tokens) == (10, 10, 9)
    # the body as read and as joined (with a growing buffer's slack), no third copy
    assert peak < 2.6 * len(body) + 8 * MiB


@TRANSPORTS
async def test_streamed_images_are_read_without_decoding_their_base64(http2: bool) -> None:
    """Three completed images of 9 MiB of base64, in unnamed events (parsed for their type
    and usage): their base64 is never parsed into strings on the event loop."""
    image = "A" * (9 * MiB)
    events = b"".join(b"data: " + json.dumps({
        "type": "image_generation.completed", "b64_json": image,
        "usage": {"output_tokens": 5}}).encode() + b"\n\n" for _ in range(3))

    async def stream(conn: Conn) -> None:
        conn.head(b"text/event-stream")
        await conn.send(events)
        await conn.end()

    async with hostile(stream) as server:
        tracemalloc.start()
        m = await one(server, ApiKind.OPENAI_IMAGES, Workload(prompt="draw", stream=True),
                      http2)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert m.error_class is None
    assert (m.items, m.output_tokens) == (3, 15)
    # an event as read and decoded, no parse of it (a parser's working memory is many times it)
    assert peak < 8 * len(image) + 8 * MiB


@TRANSPORTS
async def test_image_usages_that_sum_past_a_token_count_are_not_counted(http2: bool) -> None:
    """Each completed image counts its own tokens, summed over the images: two of 2**31 - 1
    would be past what a sample's count may hold (its row refused in storage, the sample
    lost), so the server's count is dropped, not summed."""
    events = b"".join(b"data: " + json.dumps({
        "type": "image_generation.completed", "b64_json": "x",
        "usage": {"output_tokens": 2**31 - 1, "input_tokens": 3}}).encode() + b"\n\n"
        for _ in range(2))

    async def stream(conn: Conn) -> None:
        conn.head(b"text/event-stream")
        await conn.send(events)
        await conn.end()

    async with hostile(stream) as server:
        m = await one(server, ApiKind.OPENAI_IMAGES, Workload(prompt="draw", stream=True),
                      http2)
    assert m.error_class is None
    assert m.items == 2
    assert (m.output_tokens, m.tokens_server_counted) == (0, False)


DEEP = b"[" * 1000 + b"]" * 1000
"""A value nested 1,000 deep: within what the JSON parser takes, past what str() can write."""


@TRANSPORTS
@pytest.mark.parametrize("when", ["creating", "polling"])
async def test_a_job_status_nested_a_thousand_deep_is_protocol(when: str, http2: bool) -> None:
    deep = b'{"id":"video_1","status":' + DEEP + b"}"
    created = deep if when == "creating" else {"id": "video_1", "status": "queued"}
    async with hostile(job_server(created, deep)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert (m.error_class, m.error_detail) == (
        ErrorClass.PROTOCOL, f"job status of type list {when} the job")


@TRANSPORTS
@pytest.mark.parametrize(("error", "detail"), [
    (b'{"code":' + DEEP + b"}", "job failed"),
    (b'{"message":{"a":' + DEEP + b"}}", "job failed"),
    (b'{"code":500}', "job failed: 500"), (b'{"code":"' + b"x" * 500 + b'"}',
                                          "job failed: " + "x" * 120)],
    ids=["deep-code", "deep-message", "number", "long"])
async def test_a_failed_jobs_reason_is_read_only_when_it_is_text_or_a_number(
        error: bytes, detail: str, http2: bool) -> None:
    failed = b'{"id":"video_1","status":"failed","error":' + error + b"}"
    async with hostile(job_server({"id": "video_1", "status": "queued"}, failed)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert (m.error_class, m.error_detail) == (ErrorClass.JOB_FAILED, detail)
    assert ("DELETE", "/v1/videos/video_1") not in server.requests  # failed: nothing to cancel
