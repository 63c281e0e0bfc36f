"""Reading OpenAI Responses streams and bodies: which events carry output, where usage comes
from, when a stream is complete and how a failed response is classified."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sustain.probes.client.sse import SSEEvent
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.protocols.openai_responses import ResponsesStream, whole_response
from sustain.probes.protocols.reply_collector import ReplyCollector


def event(kind: str, **fields: Any) -> SSEEvent:
    return SSEEvent(kind, json.dumps({"type": kind, **fields}))


def text(delta: str) -> SSEEvent:
    return event("response.output_text.delta", item_id="msg_1", output_index=0,
                 content_index=0, delta=delta)


def completed(status: str = "completed", **usage: Any) -> SSEEvent:
    return event(f"response.{status}", response={"status": status, "usage": usage or None})


def feed(state: ResponsesStream, *events: tuple[SSEEvent, int]) -> ResponsesStream:
    for item, at_ns in events:
        state.on_event(item, at_ns)
    return state


def test_text_deltas_time_ttft_and_itl_and_completed_carries_usage() -> None:
    state = feed(
        ResponsesStream(),
        (event("response.created", response={"status": "in_progress"}), 1),
        (event("response.output_item.added", output_index=0,
               item={"type": "message", "id": "msg_1"}), 2),
        (event("response.content_part.added", output_index=0,
               part={"type": "output_text", "text": ""}), 3),
        (text("a"), 50_000_000), (text("b"), 60_000_000), (text("c"), 72_000_000),
        (event("response.output_text.done", text="abc"), 72_000_001),
        (completed(input_tokens=9, output_tokens=3,
                   input_tokens_details={"cached_tokens": 4}), 72_000_002),
    )
    assert state.first_output_ns == 50_000_000
    assert list(state.itl_ns) == [10_000_000, 12_000_000]
    assert (state.completion_tokens, state.prompt_tokens, state.cached_tokens) == (3, 9, 4)
    assert state.done
    assert state.outcome() == (None, None)


def test_an_output_cap_reached_is_a_complete_response() -> None:
    state = feed(ResponsesStream(), (text("a"), 1), (text("b"), 2),
                 (completed("incomplete", input_tokens=1, output_tokens=2), 3))
    assert state.outcome() == (None, None)
    assert state.output_tokens == 2


def test_reasoning_and_function_arguments_are_output_created_events_are_not() -> None:
    state = feed(
        ResponsesStream(),
        (event("response.created", response={}), 1),
        (event("response.in_progress", response={}), 2),
        (event("response.reasoning_text.delta", delta="hmm"), 10),
        (event("response.function_call_arguments.delta", output_index=1, delta='{"a"'), 20),
    )
    assert state.first_output_ns == 10
    assert state.output_events == 2


def test_a_stream_without_its_final_event_is_truncated() -> None:
    state = feed(ResponsesStream(), (text("a"), 1), (text("b"), 2))
    assert state.outcome()[0] is ErrorClass.TRUNCATED


@pytest.mark.parametrize(("code", "expected"), [
    ("rate_limit_exceeded", ErrorClass.HTTP_429),
    ("invalid_prompt", ErrorClass.HTTP_4XX),
    ("server_error", ErrorClass.HTTP_5XX),
    (None, ErrorClass.HTTP_5XX),
])
def test_a_failed_response_is_classified_by_its_error_code(
        code: str | None, expected: ErrorClass) -> None:
    state = feed(ResponsesStream(), (text("a"), 1),
                 (event("response.failed", response={"status": "failed", "error": {
                     "code": code, "message": "no"}}), 2))
    assert state.outcome() == (expected, "response.failed event in stream")
    assert state.output_events == 1  # what arrived before the failure is kept


def test_an_error_event_fails_the_stream() -> None:
    state = feed(ResponsesStream(), (event("error", code="rate_limit_exceeded",
                                           message="slow down"), 1))
    assert state.outcome()[0] is ErrorClass.HTTP_429


def test_a_chat_style_error_in_the_stream_fails_it_by_its_code() -> None:
    """As LiteLLM's proxy reports a stream that failed to start."""
    state = ResponsesStream()
    state.on_event(SSEEvent("message", json.dumps(
        {"error": {"message": "x", "type": "internal_server_error", "code": "500"}})), 1)
    state.on_event(SSEEvent("message", "[DONE]"), 2)
    assert state.outcome()[0] is ErrorClass.HTTP_5XX


def test_malformed_event_data_is_a_protocol_error() -> None:
    state = ResponsesStream()
    state.on_event(SSEEvent("response.output_text.delta", '{"type": "resp'), 1)
    assert state.outcome()[0] is ErrorClass.PROTOCOL


def test_the_event_name_stands_in_for_a_missing_type() -> None:
    state = ResponsesStream()
    state.on_event(SSEEvent("response.output_text.delta", json.dumps({"delta": "x"})), 5)
    assert state.first_output_ns == 5


def test_a_kept_reply_holds_text_and_function_calls() -> None:
    state = feed(
        ResponsesStream(reply=ReplyCollector()),
        (text("Hello "), 1), (text("there"), 2),
        (event("response.output_item.added", output_index=1, item={
            "type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "lookup"}), 3),
        (event("response.function_call_arguments.delta", output_index=1, delta='{"q":'), 4),
        (event("response.function_call_arguments.delta", output_index=1, delta='"x"}'), 5),
        (completed(input_tokens=1, output_tokens=5), 6),
    )
    assert state.reply is not None
    reply = state.reply.reply()
    assert reply.text == "Hello there"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_9", "lookup", '{"q":"x"}')]


def whole(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()


def test_a_whole_response_counts_usage_and_keeps_text_and_calls() -> None:
    body = whole({"status": "completed", "output": [
        {"type": "reasoning", "summary": []},
        {"type": "message", "content": [{"type": "output_text", "text": "four words of text"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}],
        "usage": {"input_tokens": 12, "output_tokens": 7,
                  "input_tokens_details": {"cached_tokens": 12}}})
    m = whole_response(body, 0, 2_000_000, 200, keep_reply=True)
    assert (m.error_class, m.output_tokens, m.tokens_server_counted) == (None, 7, True)
    assert (m.input_tokens, m.cached_tokens, m.e2e_ms) == (12, 12, 2.0)
    assert m.reply is not None
    assert m.reply.text == "four words of text"
    assert [c.name for c in m.reply.tool_calls] == ["f"]


def test_a_whole_response_without_usage_estimates_words() -> None:
    body = whole({"status": "completed", "output": [
        {"type": "message", "content": [{"type": "output_text", "text": "a b c"}]}]})
    m = whole_response(body, 0, 1, 200)
    assert (m.output_tokens, m.tokens_server_counted) == (3, False)


def test_a_whole_response_that_failed_or_said_nothing_is_a_failure() -> None:
    failed = whole({"status": "failed", "error": {"code": "server_error", "message": "x"}})
    assert whole_response(failed, 0, 1, 200).error_class is ErrorClass.HTTP_5XX
    empty = whole({"status": "completed", "output": [], "usage": {"output_tokens": 0}})
    assert whole_response(empty, 0, 1, 200).error_class is ErrorClass.EMPTY
    assert whole_response(b"[1]", 0, 1, 200).error_class is ErrorClass.PROTOCOL
