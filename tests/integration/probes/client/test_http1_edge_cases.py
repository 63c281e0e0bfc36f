"""The lean transport against hand-written HTTP servers on loopback: interim responses, error
events on streams left open, and cancellation."""

from __future__ import annotations

import asyncio
import time

import pytest

from sustain.probes.client.http1 import send_over_http1
from sustain.probes.client.http1_pool import ConnectionPool
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.streaming import encode_request
from tests.integration.probes.client.raw_http import SSE_HEAD, chunk, read_request

BODY = encode_request({"model": "m", "messages": [], "stream": True}, {})



async def measure(pool: ConnectionPool, base_url: str, **kw: float) -> Measurement:
    target = Target(base_url=base_url, api_kind=ApiKind.OPENAI_CHAT, model="m", **kw)  # type: ignore[arg-type]
    return await send_over_http1(pool, target, BODY, True, time.perf_counter_ns())


def content(text: str, finish: str | None = None) -> bytes:
    reason = "null" if finish is None else f'"{finish}"'
    return (f'data: {{"choices":[{{"index":0,"delta":{{"content":"{text}"}},'
            f'"finish_reason":{reason}}}]}}\n\n').encode()


async def test_interim_1xx_responses_are_skipped_and_responses_stay_paired(serve) -> None:  # type: ignore[no-untyped-def]
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for text in ("first", "second"):
            await read_request(reader)
            writer.write(b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(SSE_HEAD + chunk(content(text, "stop")) + chunk(b"data: [DONE]\n\n")
                         + b"0\r\n\r\n")
            await writer.drain()
        await reader.read()

    url = await serve(handler)
    pool = ConnectionPool()
    first = await measure(pool, url)
    second = await measure(pool, url)
    await pool.aclose()
    assert first.error_class is None
    assert first.http_status == 200
    assert first.ttft_ms is not None
    assert first.ttft_ms >= 50.0
    assert second.error_class is None
    assert second.ttft_ms is not None
    assert second.ttft_ms >= 50.0


async def test_error_event_on_a_stream_left_open_is_reported_at_once(serve) -> None:  # type: ignore[no-untyped-def]
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(SSE_HEAD + chunk(content("a"))
                     + chunk(b'data: {"error":{"message":"engine died","code":500}}\n\n'))
        await writer.drain()
        await reader.read()  # the stream stays open until the client goes away

    url = await serve(handler)
    pool = ConnectionPool()
    m = await measure(pool, url, timeout_total_s=30.0)
    await pool.aclose()
    assert m.error_class is ErrorClass.HTTP_5XX  # the error event, not the total timeout
    # Only guards against a hang: reported at once, not after the 30 s total timeout.
    assert m.e2e_ms < 10_000.0


async def test_cancelled_request_closes_its_connection(serve) -> None:  # type: ignore[no-untyped-def]
    answering, closed = asyncio.Event(), asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(SSE_HEAD + chunk(content("a")))
        await writer.drain()
        answering.set()
        await reader.read()  # returns when the client closes the connection
        closed.set()

    url = await serve(handler)
    pool = ConnectionPool()
    task = asyncio.create_task(measure(pool, url, timeout_total_s=30.0))
    await asyncio.wait_for(answering.wait(), 30)  # the request is in flight, mid-stream
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(closed.wait(), 10.0)  # a hang guard: it closes at once
    assert pool.idle_connections == 0
    await pool.aclose()


async def test_caller_headers_cannot_duplicate_framing_headers(serve) -> None:  # type: ignore[no-untyped-def]
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.close()

    url = await serve(handler)
    pool = ConnectionPool()
    target = Target(base_url=url, api_kind=ApiKind.OPENAI_CHAT, model="m")
    encoded = (BODY[0], {**BODY[1], "Host": "evil", "Content-Length": "0"})
    await send_over_http1(pool, target, encoded, True, time.perf_counter_ns())
    await pool.aclose()
    head = seen[0].lower()
    assert head.count(b"host:") == 1
    assert head.count(b"content-length:") == 1
    assert b"evil" not in head
