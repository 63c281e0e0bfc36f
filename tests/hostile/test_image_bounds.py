"""A hostile image server: floods of partial images, endless large partials, whole answers of
millions of entries or of large base64 images, usages past a token count. Each is bounded and
never decoded on the event loop, through both transports."""

from __future__ import annotations

import base64
import json
import tracemalloc

import pytest

from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.workload.spec import Workload
from tests.hostile.media_servers import (
    SOCKET_SLACK,
    TRANSPORTS,
    Conn,
    MiB,
    cut_off,
    hostile,
    one,
)

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
