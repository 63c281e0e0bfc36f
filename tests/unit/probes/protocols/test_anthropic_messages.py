"""Reading Anthropic Messages streams and bodies: which events carry output, how input is
counted with its cache, when a stream is complete and how an error is classified."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sustain.probes.client.sse import SSEEvent
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.protocols.anthropic_messages import MessagesStream, whole_response
from sustain.probes.protocols.reply_collector import ReplyCollector


def event(kind: str, **fields: Any) -> SSEEvent:
    return SSEEvent(kind, json.dumps({"type": kind, **fields}))


def start(**usage: Any) -> SSEEvent:
    return event("message_start", message={"id": "msg_1", "usage": usage})


def delta(text: str, index: int = 0) -> SSEEvent:
    return event("content_block_delta", index=index,
                 delta={"type": "text_delta", "text": text})


def end(output_tokens: int, stop_reason: str = "end_turn") -> list[SSEEvent]:
    return [event("content_block_stop", index=0),
            event("message_delta", delta={"stop_reason": stop_reason},
                  usage={"output_tokens": output_tokens}),
            event("message_stop")]


def feed(state: MessagesStream, *events: SSEEvent, at_ns: list[int] | None = None
         ) -> MessagesStream:
    for k, item in enumerate(events):
        state.on_event(item, at_ns[k] if at_ns else k + 1)
    return state


def test_text_deltas_time_ttft_and_itl_pings_and_block_starts_do_not() -> None:
    events = [start(input_tokens=5, output_tokens=1),
              event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
              event("ping"), delta("a"), event("ping"), delta("b"), delta("c"), *end(3)]
    times = [1, 2, 3, 50_000_000, 55_000_000, 60_000_000, 72_000_000, 72_000_001,
             72_000_002, 72_000_003]
    state = feed(MessagesStream(), *events, at_ns=times)
    assert state.first_output_ns == 50_000_000
    assert list(state.itl_ns) == [10_000_000, 12_000_000]
    assert (state.completion_tokens, state.prompt_tokens) == (3, 5)
    assert state.outcome() == (None, None)


def test_the_prompt_counts_cached_and_cache_written_input_and_cached_is_the_read() -> None:
    state = feed(MessagesStream(), start(input_tokens=10, cache_read_input_tokens=90,
                                         cache_creation_input_tokens=5), delta("x"), *end(1))
    assert (state.prompt_tokens, state.cached_tokens) == (105, 90)


def test_output_usage_comes_from_message_delta_not_message_start() -> None:
    state = feed(MessagesStream(), start(input_tokens=2, output_tokens=1), delta("a"),
                 delta("b"))
    assert state.completion_tokens is None
    feed(state, *end(2))
    assert state.completion_tokens == 2


def test_thinking_and_tool_input_deltas_are_output_signatures_are_not() -> None:
    state = feed(MessagesStream(),
                 event("content_block_delta", index=0,
                       delta={"type": "signature_delta", "signature": "abc"}),
                 event("content_block_delta", index=0,
                       delta={"type": "thinking_delta", "thinking": "hmm"}),
                 event("content_block_delta", index=1,
                       delta={"type": "input_json_delta", "partial_json": "{}"}))
    assert state.output_events == 2
    assert state.first_output_ns == 2


def test_a_stream_that_never_stops_is_truncated() -> None:
    state = feed(MessagesStream(), start(input_tokens=1), delta("a"))
    assert state.outcome()[0] is ErrorClass.TRUNCATED


@pytest.mark.parametrize(("kind", "expected"), [
    ("overloaded_error", ErrorClass.HTTP_5XX),
    ("api_error", ErrorClass.HTTP_5XX),
    ("rate_limit_error", ErrorClass.HTTP_429),
    ("invalid_request_error", ErrorClass.HTTP_4XX),
])
def test_an_error_event_mid_stream_fails_it_by_its_type(kind: str, expected: ErrorClass
                                                        ) -> None:
    state = feed(MessagesStream(), start(input_tokens=1), delta("a"),
                 event("error", error={"type": kind, "message": "x"}), delta("b"))
    assert state.outcome() == (expected, "error event in stream")
    assert state.output_events == 1  # nothing after the error is read


def test_a_kept_reply_holds_text_and_tool_uses() -> None:
    state = feed(MessagesStream(reply=ReplyCollector()), start(input_tokens=1),
                 delta("Let me look. "),
                 event("content_block_start", index=1, content_block={
                     "type": "tool_use", "id": "toolu_1", "name": "search", "input": {}}),
                 event("content_block_delta", index=1,
                       delta={"type": "input_json_delta", "partial_json": '{"q": '}),
                 event("content_block_delta", index=1,
                       delta={"type": "input_json_delta", "partial_json": '"x"}'}),
                 *end(6, "tool_use"))
    assert state.reply is not None
    reply = state.reply.reply()
    assert reply.text == "Let me look. "
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("toolu_1", "search", '{"q": "x"}')]


def body(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()


def test_a_whole_message_counts_usage_and_keeps_text_and_tool_uses() -> None:
    raw = body({"type": "message", "content": [
        {"type": "text", "text": "two words"},
        {"type": "tool_use", "id": "toolu_2", "name": "f", "input": {"a": 1}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 3, "cache_read_input_tokens": 7, "output_tokens": 9}})
    m = whole_response(raw, 0, 3_000_000, 200, keep_reply=True)
    assert (m.error_class, m.output_tokens, m.input_tokens, m.cached_tokens) == \
        (None, 9, 10, 7)
    assert m.reply is not None
    assert m.reply.text == "two words"
    assert [(c.name, c.arguments) for c in m.reply.tool_calls] == [("f", '{"a":1}')]


def test_a_whole_message_with_no_content_is_empty_and_an_error_body_fails() -> None:
    empty = body({"type": "message", "content": [], "usage": {"input_tokens": 1,
                                                             "output_tokens": 0}})
    assert whole_response(empty, 0, 1, 200).error_class is ErrorClass.EMPTY
    error = body({"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
    assert whole_response(error, 0, 1, 200).error_class is ErrorClass.HTTP_5XX
