"""Responses too large to measure, over real loopback HTTP and both transports: a server-sent
event line or event over the cap, and a non-streamed body over WHOLE_BODY_LIMIT, end the
request at once as `protocol`, and never stall the loop that times every other request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.http1 import send_over_http1
from sustain.probes.client.http1_pool import FRAMING_TOO_LARGE
from sustain.probes.client.httpx_transport import send_over_httpx
from sustain.probes.client.sse import MIB
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.streaming import BODY_TOO_LARGE, encode_request
from tests.integration.probes.client.raw_http import SSE_HEAD, Handler, Serve, chunk, read_request

STREAMED = encode_request({"model": "m", "messages": [], "stream": True}, {})
WHOLE = encode_request({"model": "m", "messages": []}, {})
KIB_64 = 64 * 1024
FILLER = b"x" * KIB_64

JSON_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
             b"transfer-encoding: chunked\r\n\r\n")
FINISH = (b'data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}\n\n'
          b"data: [DONE]\n\n")


@pytest.fixture
async def clients() -> AsyncIterator[HttpClients]:
    async with HttpClients() as shared:
        yield shared



async def send(clients: HttpClients, via_httpx: bool, base_url: str, *, stream: bool = True,
               **kw: float) -> Measurement:
    target = Target(base_url=base_url, api_kind=ApiKind.OPENAI_CHAT, model="m", **kw)  # type: ignore[arg-type]
    encoded = STREAMED if stream else WHOLE
    if via_httpx:
        return await send_over_httpx(clients.httpx(), target, encoded, stream,
                                     time.perf_counter_ns())
    return await send_over_http1(clients.pool(), target, encoded, stream,
                                 time.perf_counter_ns())


@dataclass
class Written:
    """What a server connection managed to write before the client went away."""

    body_bytes: int = 0
    closed: asyncio.Event = field(default_factory=asyncio.Event)


def streaming(head: bytes, first: bytes, body: bytes, repeat: int | None, last: bytes = b"",
              written: Written | None = None) -> Handler:
    """A server that answers every request with `head`, then `first`, then `body` `repeat`
    times (None: until the client goes away), then `last`, each piece a chunk."""
    log = written or Written()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await read_request(reader)
                writer.write(head + (chunk(first) if first else b""))  # b"" would end it
                count = 0
                while repeat is None or count < repeat:
                    writer.write(chunk(body))
                    log.body_bytes += len(body)
                    count += 1
                    await writer.drain()
                writer.write(chunk(last) + b"0\r\n\r\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            log.closed.set()
            writer.close()

    return handler


async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    await reader.read()  # until the client gives up
    writer.close()


async def test_an_endless_or_100_mb_line_ends_as_protocol_while_another_timeout_fires_on_time(
        serve: Serve, clients: HttpClients, via_httpx: bool) -> None:
    """While requests keep reading a never-ending line and a 100 MB one, back to back, another
    request's 1 s first-token timeout fires, not before its time and without a stall of the
    loop. How close to its setting it fires (target: within 50 ms) depends on the machine:
    benchmarks/loop_stall.py reports it."""
    endless_written, huge_written = Written(), Written()
    endless = await serve(streaming(SSE_HEAD, b"data: ", FILLER, None, written=endless_written))
    huge = await serve(streaming(SSE_HEAD, b"data: ", FILLER, 100 * MIB // KIB_64,
                                 b"\n\n" + FINISH, huge_written))
    silent = await serve(never_answers)
    stop = asyncio.Event()
    oversized: dict[str, list[tuple[Measurement, float]]] = {endless: [], huge: []}

    async def keep_reading(url: str) -> None:
        while not stop.is_set():
            m = await send(clients, via_httpx, url, timeout_total_s=10.0)
            oversized[url].append((m, time.monotonic()))

    readers = [asyncio.create_task(keep_reading(url)) for url in (endless, huge)]
    async with asyncio.timeout(30):  # until both readers are reading (a hang guard only)
        while min(endless_written.body_bytes, huge_written.body_bytes) < MIB:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    started = time.monotonic()
    timed = await send(clients, via_httpx, silent, timeout_first_token_s=1.0)
    ended = time.monotonic()
    elapsed = ended - started
    stop.set()
    await asyncio.gather(*readers)

    assert timed.error_class is ErrorClass.TIMEOUT_FIRST_TOKEN
    assert elapsed >= 0.999, f"the 1 s timeout fired after {elapsed:.3f} s"
    assert timed.e2e_ms >= 999.0
    # Only guards against a hang or a stalled loop: the timeout fires ~1 s after the send.
    assert elapsed < 5.0, f"the 1 s timeout fired after {elapsed:.3f} s"
    for url in (endless, huge):  # each reader ended requests while the timeout was pending
        assert any(started <= at <= ended for _, at in oversized[url]), url
    everything = [m for done in oversized.values() for m, _ in done]
    assert {(m.error_class, m.error_detail) for m in everything} == {
        (ErrorClass.PROTOCOL, "server-sent event line over 1 MiB")}
    # Each request stopped reading at the 1 MiB cap: what the servers could write stayed
    # far below a 100 MB line per request (the socket buffers hold a few MiB at most).
    assert huge_written.body_bytes < len(oversized[huge]) * 32 * MIB
    # Only guards against a hang: each ends at the cap, not at the 10 s total timeout.
    assert max(m.e2e_ms for m in everything) < 5000.0


async def test_a_line_over_the_targets_cap_ends_the_request_without_reading_the_rest(
        serve: Serve, clients: HttpClients, via_httpx: bool) -> None:
    written = Written()
    url = await serve(streaming(SSE_HEAD, b"data: ", FILLER, 100 * MIB // KIB_64,
                                b"\n\n" + FINISH, written))
    m = await send(clients, via_httpx, url, max_event_bytes=KIB_64, timeout_total_s=30.0)
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == "server-sent event line over 64 KiB"
    await asyncio.wait_for(written.closed.wait(), 5.0)  # a hang guard only
    assert written.body_bytes < 32 * MIB, "the client read on after the cap"


async def test_an_event_of_many_data_lines_over_the_cap_ends_the_request_as_protocol(
        serve: Serve, clients: HttpClients, via_httpx: bool) -> None:
    line = b"data: " + b"d" * 1000 + b"\n"
    url = await serve(streaming(SSE_HEAD, b"", line * 64, None))
    m = await send(clients, via_httpx, url, max_event_bytes=KIB_64, timeout_total_s=30.0)
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == "server-sent event over 64 KiB"


async def test_events_within_a_raised_cap_are_measured_as_usual(
        serve: Serve, clients: HttpClients, via_httpx: bool) -> None:
    url = await serve(streaming(SSE_HEAD, b'data: {"padding":"', FILLER, 4 * MIB // KIB_64,
                                b'"}\n\n' + FINISH))
    m = await send(clients, via_httpx, url, max_event_bytes=8 * MIB)
    assert m.error_class is None, m.error_detail
    assert m.output_tokens == 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed-answered-whole"])
async def test_a_non_streamed_body_over_16_mib_ends_as_protocol_without_reading_the_rest(
        serve: Serve, clients: HttpClients, via_httpx: bool, stream: bool) -> None:
    """Also the JSON body a server sends for a streamed request it answers whole."""
    written = Written()
    url = await serve(streaming(JSON_HEAD, b'{"choices":[{"text":"', FILLER, None,
                                written=written))
    m = await send(clients, via_httpx, url, stream=stream, timeout_total_s=30.0,
                   timeout_first_token_s=30.0)
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == BODY_TOO_LARGE == "response body over 16 MiB"
    assert m.streamed is (False if stream else None)
    await asyncio.wait_for(written.closed.wait(), 5.0)  # a hang guard only
    assert written.body_bytes < 64 * MIB, "the client read on after the cap"


async def test_a_never_ending_response_header_ends_the_request_as_protocol(
        serve: Serve, clients: HttpClients, via_httpx: bool) -> None:
    """The parser grows a header line by copying it on every read: a never-ending one must
    end early, not be copied for as long as it lasts."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nx-endless: ")
        try:
            while True:
                writer.write(FILLER)
                await writer.drain()
        except ConnectionError:
            writer.close()

    url = await serve(handler)
    m = await send(clients, via_httpx, url, timeout_total_s=30.0)
    assert m.error_class is ErrorClass.PROTOCOL
    # Only guards against a hang: the request ends at the parser's limit, not at the 30 s
    # total timeout.
    assert m.e2e_ms < 10_000.0
    if not via_httpx:  # httpx (h11) has a limit of its own, with its own message
        assert m.error_detail == FRAMING_TOO_LARGE


async def test_never_ending_trailers_after_done_leave_the_request_measured_and_end_it_early(
        serve: Serve, clients: HttpClients, via_httpx: bool) -> None:
    written = Written()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(SSE_HEAD + chunk(FINISH) + b"0\r\nx-endless: ")
        try:
            while True:
                writer.write(FILLER)
                written.body_bytes += len(FILLER)
                await writer.drain()
        except ConnectionError:
            writer.close()
        finally:
            written.closed.set()

    url = await serve(handler)
    started = time.monotonic()
    m = await send(clients, via_httpx, url, timeout_total_s=30.0)
    took = time.monotonic() - started
    assert m.error_class is None, m.error_detail
    assert m.output_tokens == 1
    await asyncio.wait_for(written.closed.wait(), 5.0)  # a hang guard only
    # Ended at a limit on the trailers, not by reading them until the 1 s drain deadline
    # (loopback would carry far more than this in a second).
    assert written.body_bytes < 32 * MIB, "the client read trailers on"
    # Only guards against a hang (it ends in milliseconds); the bytes written, above, tell
    # it apart from reading on until the 1 s drain deadline.
    assert took < 10.0, "hung on the trailers"
