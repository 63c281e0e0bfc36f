from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from sustain.probes.client.openai_protocol import StreamState
from sustain.probes.client.sse import SSEDecoder, SSEEvent

VALID_STREAM = (
    ": keep-alive comment\r\n\r\n"
    'data: {"choices":[{"delta":{"role":"assistant"}}]}\r\n\r\n'
    "event: message\n"
    'data: {"choices":[{"delta":{"content":"héllo → 世界"}}]}\n\n'
    "data: line one\n"
    "data: line two\n\n"
    'data:{"no":"space"}\r\r'
    "data: [DONE]\n\n"
).encode()


def decode_all(chunks: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.close()


def test_decodes_crlf_lf_and_cr_line_endings_comments_and_multiline_data() -> None:
    events = decode_all([VALID_STREAM])
    assert [e.data for e in events] == [
        '{"choices":[{"delta":{"role":"assistant"}}]}',
        '{"choices":[{"delta":{"content":"héllo → 世界"}}]}',
        "line one\nline two",
        '{"no":"space"}',
        "[DONE]",
    ]
    assert all(e.event == "message" for e in events)


def test_event_field_names_the_event() -> None:
    assert decode_all([b"event: error\ndata: {}\n\n"]) == [SSEEvent("error", "{}")]


def test_an_event_cut_off_by_the_end_of_the_stream_is_still_delivered() -> None:
    assert decode_all([b"data: complete\n\ndata: [DONE]"]) == [
        SSEEvent("message", "complete"), SSEEvent("message", "[DONE]")]
    assert decode_all([b"data: a\ndata: b\n"]) == [SSEEvent("message", "a\nb")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    assert decode_all([b"data: a\r", b"\n\r", b"\n"]) == [SSEEvent("message", "a")]


OPENAI_STREAM = "".join(
    f"data: {line}\r\n\r\n" if i % 2 else f"data: {line}\n\n" for i, line in enumerate([
        '{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
        ": keep-alive",
        '{"choices":[{"index":0,"delta":{"reasoning_content":"thinking…"}}]}',
        '{"choices":[{"index":0,"delta":{"content":"héllo"}}]}',
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1"}]}}]}',
        '{"choices":[{"index":0,"delta":{"content":" 世界"},"finish_reason":"stop"}]}',
        '{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4}}',
        "[DONE]",
    ])).replace("data: : keep-alive", ": keep-alive").encode()


def tokens_of(chunks: list[bytes]) -> tuple[int, int, bool]:
    state = StreamState()
    for n, event in enumerate(decode_all(chunks)):
        state.on_event(event, n)
    return state.output_tokens, state.output_events, state.complete


@given(st.data())
def test_any_rechunking_yields_the_same_events(data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(VALID_STREAM)), max_size=40)))
    bounds = [0, *cuts, len(VALID_STREAM)]
    chunks = [VALID_STREAM[a:b] for a, b in itertools.pairwise(bounds)]
    assert decode_all(chunks) == decode_all([VALID_STREAM])


@given(st.data())
def test_any_rechunking_of_an_openai_stream_yields_the_same_token_count(
        data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(OPENAI_STREAM)), max_size=60)))
    bounds = [0, *cuts, len(OPENAI_STREAM)]
    chunks = [OPENAI_STREAM[a:b] for a, b in itertools.pairwise(bounds)]
    assert tokens_of(chunks) == tokens_of([OPENAI_STREAM]) == (4, 4, True)


def test_invalid_utf8_raises() -> None:
    decoder = SSEDecoder()
    try:
        decoder.feed(b"data: \xff\xfe\n\n")
    except UnicodeDecodeError:
        return
    raise AssertionError("invalid UTF-8 was accepted")
