"""Hostile text streams: an answer in millions of one-token chunks is `protocol` once it
passes the bound on output events, holding no more inter-token gaps (chat on the lean
transport, Anthropic Messages on httpx)."""

from __future__ import annotations

import pytest

from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.protocols import streaming
from sustain.probes.protocols.streaming import MAX_OUTPUT_EVENTS
from sustain.probes.workload.spec import Workload
from tests.hostile.media_servers import RSS_GROWTH, Conn, MiB, hostile, one, rss

HELD_PER_GAP = 8 + 32
"""Bytes a gap costs while an answer is read (8 in the packed array) and after (a float in
the sample's tuple, and its pointer)."""


@pytest.mark.parametrize(("kind", "event", "http2"), [
    (ApiKind.OPENAI_CHAT, b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n',
     False),
    (ApiKind.ANTHROPIC_MESSAGES,
     b'data: {"type":"content_block_delta","index":0,'
     b'"delta":{"type":"text_delta","text":"x"}}\n\n', True),
], ids=["chat-lean-http1", "anthropic-httpx"])
async def test_a_text_stream_of_endless_one_token_chunks_ends_at_the_event_bound(
        kind: ApiKind, event: bytes, http2: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each output event is an inter-token gap held until the answer ends: past the bound the
    answer is `protocol` and no more gaps are held, so the probe's memory is bounded. The
    bound is lowered here to an eighth (the real one takes 2 M events, a dozen seconds of
    parsing per case): what is checked is that reading stops holding gaps at it, whatever
    it is, and what a gap costs."""
    bound = MAX_OUTPUT_EVENTS // 8
    monkeypatch.setattr(streaming, "MAX_OUTPUT_EVENTS", bound)
    batches = bound // 4096 + 16  # the load loop's bound: just past the bound

    async def chunks(conn: Conn) -> None:
        conn.head(b"text/event-stream")
        batch = event * 4096
        for _ in range(batches):
            await conn.send(batch)
        await conn.end()

    async with hostile(chunks) as server:
        before = rss()
        m = await one(server, kind, Workload(prompt="talk"), http2)
        grown = rss() - before
    assert (m.error_class, m.error_detail) == (
        ErrorClass.PROTOCOL, f"stream of over {bound} output events")
    assert len(m.itl_ms) == bound - 1
    assert grown < bound * HELD_PER_GAP + RSS_GROWTH


def test_the_bound_leaves_room_for_the_longest_answer_a_workload_may_ask_for() -> None:
    """Twice the most tokens `max_tokens` takes, one event each; and at most 16 MiB of gaps
    held per answer."""
    most_tokens = Workload.model_fields["max_tokens"].metadata
    (limit,) = [m.le for m in most_tokens if getattr(m, "le", None) is not None]
    assert 2 * limit <= MAX_OUTPUT_EVENTS
    assert 16 * MiB >= MAX_OUTPUT_EVENTS * 8
