"""Reasoning models think before they answer: TTFT stays the first output of any kind, TTFO is
the first *answer* output, reasoning tokens come from the server's usage or are counted from
the reasoning deltas (and flagged so), in every protocol that streams thinking (chat in both
spellings, Responses, Anthropic Messages) and in their whole answers."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from sustain.probes.client.sse import SSEEvent
from sustain.probes.measure.sample import NS_PER_MS, Measurement, Sample
from sustain.probes.measure.summary import summarise
from sustain.probes.protocols import anthropic_messages, openai_chat, openai_responses
from sustain.probes.protocols.anthropic_messages import MessagesStream
from sustain.probes.protocols.openai_responses import ResponsesStream
from sustain.probes.protocols.streaming import StreamState, answered_whole, from_state

T_SEND = 1_000 * NS_PER_MS


def at_ms(seq: int, measurement: Measurement) -> Sample:
    return Sample(seq=seq, stage=0, t_sched_ms=None, t_send_ms=float(seq),
                  sent_at=datetime(2026, 1, 1, tzinfo=UTC), measurement=measurement)


def ms(value: float) -> int:
    return T_SEND + int(value * NS_PER_MS)


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None,
          usage: dict[str, Any] | None = None) -> SSEEvent:
    payload: dict[str, Any] = {"choices": [] if delta is None else
                               [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        payload["usage"] = usage
    return SSEEvent("", json.dumps(payload))


def measured(state: StreamState, end_ms: float) -> Measurement:
    return from_state(state, T_SEND, ms(end_ms), 200, None, None)


@pytest.mark.parametrize("spelling", ["reasoning_content", "reasoning"])
def test_a_chat_stream_that_thinks_first_has_ttft_at_the_thought_and_ttfo_at_the_answer(
        spelling: str) -> None:
    state = StreamState()
    state.on_event(chunk({"role": "assistant", "content": ""}), ms(1))
    for k, at in enumerate((10.0, 12.0, 14.0)):
        state.on_event(chunk({spelling: f"think{k} "}), ms(at))
    state.on_event(chunk({"content": "answer "}), ms(20))
    state.on_event(chunk({"content": "done"}, finish="stop"), ms(22))
    state.on_event(SSEEvent("", "[DONE]"), ms(23))
    m = measured(state, 23)
    assert m.ttft_ms == pytest.approx(10.0)
    assert m.ttfo_ms == pytest.approx(20.0)
    assert m.itl_ms == pytest.approx((2.0, 2.0, 6.0, 2.0))  # thinking is output, as in MLPerf
    assert (m.output_tokens, m.reasoning_tokens, m.reasoning_server_counted) == (5, 3, False)
    assert m.answer_tokens == 2
    assert m.reasoning_share == pytest.approx(0.6)


def test_a_chat_streams_reasoning_tokens_come_from_its_usage_when_it_reports_them() -> None:
    state = StreamState()
    state.on_event(chunk({"reasoning_content": "a"}), ms(5))
    state.on_event(chunk({"content": "b"}, finish="stop"), ms(9))
    state.on_event(chunk(usage={"prompt_tokens": 4, "completion_tokens": 40,
                                "completion_tokens_details": {"reasoning_tokens": 30}}), ms(9))
    m = measured(state, 10)
    assert (m.output_tokens, m.reasoning_tokens, m.reasoning_server_counted) == (40, 30, True)
    assert m.answer_tokens == 10


def test_a_model_that_does_not_think_has_ttfo_equal_to_ttft_and_no_reasoning() -> None:
    state = StreamState()
    state.on_event(chunk({"content": "a"}), ms(7))
    state.on_event(chunk({"content": "b"}, finish="stop"), ms(9))
    m = measured(state, 10)
    assert m.ttfo_ms == m.ttft_ms == pytest.approx(7.0)
    assert m.reasoning_tokens is None
    assert m.reasoning_share == 0.0


def test_a_tool_call_is_an_answer_for_ttfo() -> None:
    state = StreamState()
    state.on_event(chunk({"reasoning_content": "hmm"}), ms(3))
    state.on_event(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}),
                   ms(8))
    state.on_event(chunk({}, finish="tool_calls"), ms(9))
    assert measured(state, 9).ttfo_ms == pytest.approx(8.0)


def responses_event(kind: str, **fields: Any) -> SSEEvent:
    return SSEEvent(kind, json.dumps({"type": kind, **fields}))


@pytest.mark.parametrize("reasoning_kind", ["response.reasoning_text.delta",
                                            "response.reasoning_summary_text.delta"])
def test_a_responses_stream_times_its_answer_after_reasoning_and_reads_reasoning_usage(
        reasoning_kind: str) -> None:
    state = ResponsesStream()
    state.on_event(responses_event(reasoning_kind, delta="think "), ms(4))
    state.on_event(responses_event(reasoning_kind, delta="more "), ms(6))
    state.on_event(responses_event("response.output_text.delta", delta="answer"), ms(11))
    state.on_event(responses_event("response.completed", response={
        "status": "completed", "usage": {"input_tokens": 3, "output_tokens": 9,
                                         "output_tokens_details": {"reasoning_tokens": 7}}}),
        ms(12))
    m = measured(state, 12)
    assert m.ttft_ms == pytest.approx(4.0)
    assert m.ttfo_ms == pytest.approx(11.0)
    assert (m.reasoning_tokens, m.reasoning_server_counted, m.answer_tokens) == (7, True, 2)


def test_an_anthropic_stream_times_its_answer_after_thinking_and_counts_thinking_deltas() -> None:
    def delta(kind: str, key: str, value: str) -> SSEEvent:
        return SSEEvent("content_block_delta", json.dumps(
            {"type": "content_block_delta", "index": 0, "delta": {"type": kind, key: value}}))

    state = MessagesStream()
    state.on_event(delta("thinking_delta", "thinking", "hmm "), ms(5))
    state.on_event(delta("thinking_delta", "thinking", "so "), ms(7))
    state.on_event(delta("thinking_delta", "thinking", "then "), ms(9))
    state.on_event(delta("text_delta", "text", "answer"), ms(15))
    state.on_event(SSEEvent("message_delta", json.dumps({
        "type": "message_delta", "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": 8}})), ms(16))
    state.on_event(SSEEvent("message_stop", json.dumps({"type": "message_stop"})), ms(16))
    m = measured(state, 16)
    assert m.ttft_ms == pytest.approx(5.0)
    assert m.ttfo_ms == pytest.approx(15.0)
    # Anthropic counts thinking inside output_tokens without saying how much: counted here.
    assert (m.output_tokens, m.reasoning_tokens, m.reasoning_server_counted) == (8, 3, False)


def test_whole_answers_read_reasoning_from_usage_or_estimate_it_from_the_text() -> None:
    chat = openai_chat.OPENAI_CHAT.whole(json.dumps({"choices": [{"message": {
        "content": "the answer", "reasoning_content": "one two three"}}], "usage": {
        "prompt_tokens": 2, "completion_tokens": 12,
        "completion_tokens_details": {"reasoning_tokens": 9}}}).encode(), T_SEND, ms(30), 200)
    assert (chat.reasoning_tokens, chat.reasoning_server_counted, chat.answer_tokens) == \
        (9, True, 3)
    responses = openai_responses.OPENAI_RESPONSES.whole(json.dumps({"output": [
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "a b c d"}]},
        {"type": "message", "content": [{"type": "output_text", "text": "yes"}]}]}).encode(),
        T_SEND, ms(30), 200)
    assert (responses.reasoning_tokens, responses.reasoning_server_counted) == (4, False)
    assert responses.output_tokens == 5  # no usage: the words of both texts
    messages = anthropic_messages.ANTHROPIC_MESSAGES.whole(json.dumps({"content": [
        {"type": "thinking", "thinking": "x y"}, {"type": "text", "text": "z"}],
        "usage": {"input_tokens": 1, "output_tokens": 6}}).encode(), T_SEND, ms(30), 200)
    assert (messages.reasoning_tokens, messages.output_tokens, messages.answer_tokens) == \
        (2, 6, 4)
    assert chat.ttfo_ms is None  # a whole answer has no first output of any kind
    assert answered_whole(chat).ttfo_ms == chat.e2e_ms  # unless it was asked to stream


def reasoning_sample(seq: int, ttfo: float, e2e: float, output: int, reasoning: int) -> Sample:
    m = Measurement(ttft_ms=5.0, itl_ms=(1.0,) * (output - 1), e2e_ms=e2e,
                    output_tokens=output, tokens_server_counted=True, input_tokens=3,
                    http_status=200, error_class=None, ttfo_ms=ttfo,
                    reasoning_tokens=reasoning, reasoning_server_counted=True)
    return at_ms(seq, m)


def test_a_run_summary_says_how_much_went_to_thinking_and_the_answers_own_pace() -> None:
    samples = [reasoning_sample(0, ttfo=50.0, e2e=140.0, output=40, reasoning=30),
               reasoning_sample(1, ttfo=70.0, e2e=160.0, output=40, reasoning=30)]
    summary = summarise(samples, duration_s=1.0)
    assert summary.reasoning_tokens == 60
    assert summary.answer_tokens == 20
    assert summary.reasoning_share == pytest.approx(0.75)
    assert summary.reasoning_tokens_estimated is False
    assert summary.ttfo_ms is not None
    assert summary.ttfo_ms.count == 2
    assert summary.answer_tpot_ms is not None
    assert summary.answer_tpot_ms.p50 == pytest.approx(10.0)  # 90 ms over 9 gaps


def test_a_run_of_an_item_kind_has_no_reasoning_figures() -> None:
    m = Measurement(ttft_ms=None, itl_ms=(), e2e_ms=9.0, output_tokens=0,
                    tokens_server_counted=False, input_tokens=4, http_status=200,
                    error_class=None, items=4)
    summary = summarise([at_ms(0, m)], duration_s=1.0)
    assert summary.reasoning_share is None
    assert summary.ttfo_ms is None
