"""Hostile text streams: an answer in millions of one-token chunks is `protocol` once it
passes the bound on output events, holding no more ITL gaps, through both transports."""

from __future__ import annotations

import pytest

from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.protocols.streaming import MAX_OUTPUT_EVENTS
from sustain.probes.workload.spec import Workload
from tests.hostile.media_servers import RSS_GROWTH, TRANSPORTS, Conn, hostile, one, rss


@TRANSPORTS
@pytest.mark.parametrize(("kind", "event"), [
    (ApiKind.OPENAI_CHAT, b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'),
    (ApiKind.ANTHROPIC_MESSAGES,
     b'data: {"type":"content_block_delta","index":0,'
     b'"delta":{"type":"text_delta","text":"x"}}\n\n'),
], ids=["chat", "anthropic"])
async def test_a_text_stream_of_a_million_one_token_chunks_ends_at_the_event_bound(
        http2: bool, kind: ApiKind, event: bytes) -> None:
    """Each output event is an ITL gap held until the answer ends: past MAX_OUTPUT_EVENTS the
    answer is `protocol` and no more gaps are held, so the probe's memory is bounded."""
    async def chunks(conn: Conn) -> None:
        conn.head(b"text/event-stream")
        batch = event * 4096
        for _ in range(256):  # the load loop's bound: a million events
            await conn.send(batch)
        await conn.end()

    async with hostile(chunks) as server:
        before = rss()
        m = await one(server, kind, Workload(prompt="talk"), http2)
        grown = rss() - before
    assert (m.error_class, m.error_detail) == (
        ErrorClass.PROTOCOL, f"stream of over {MAX_OUTPUT_EVENTS} output events")
    assert len(m.itl_ms) == MAX_OUTPUT_EVENTS - 1
    assert grown < RSS_GROWTH
