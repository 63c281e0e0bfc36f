"""Reading OpenAI-compatible responses: which events carry output, when a stream is complete."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from sustain.probes.client.sse import SSEEvent
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.protocols.openai_chat import message_text
from sustain.probes.protocols.reply_collector import ReplyCollector
from sustain.probes.protocols.streaming import (
    Deadlines,
    StreamState,
    choice_has_output,
    choice_output,
)
from sustain.probes.protocols.usage_counts import token_count


def event(payload: dict[str, Any] | str) -> SSEEvent:
    return SSEEvent("message", payload if isinstance(payload, str) else json.dumps(payload))


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def feed(state: StreamState, *events: tuple[dict[str, Any] | str, int]) -> StreamState:
    for payload, at_ns in events:
        state.on_event(event(payload), at_ns)
    return state


def test_role_only_and_empty_deltas_are_not_output() -> None:
    assert not choice_has_output({"delta": {"role": "assistant", "content": ""}})
    assert not choice_has_output({"delta": {}})
    assert choice_has_output({"delta": {"content": "x"}})
    assert choice_has_output({"delta": {"reasoning_content": "thinking"}})
    assert choice_has_output({"delta": {"reasoning": "thinking"}})
    assert choice_has_output({"delta": {"tool_calls": [{"index": 0}]}})
    assert choice_has_output({"text": "completion text"})


CHOICES: list[Any] = [
    [{"delta": {"content": "x"}}],
    [{"delta": {"content": "x"}, "finish_reason": "stop"}],
    [{"delta": {"content": ""}, "finish_reason": "length"}],
    [{"delta": {"content": ["part"]}}],
    [{"delta": {"content": 5}}],
    [{"delta": {"content": None, "tool_calls": [{"index": 0}]}}],
    [{"delta": {"reasoning_content": "think"}}],
    [{"delta": {"content": "x"}}, {"delta": {"reasoning": "think"}, "finish_reason": "stop"}],
    [{"delta": {"reasoning": "think"}}, {"delta": {"content": "x"}}],
    [{"delta": "x"}],
    [{"text": "completion"}],
    ["x"],
    [None, {"delta": {"content": "x"}}],
]


def test_each_chunk_counts_as_its_choices_say_whichever_path_reads_it() -> None:
    for choices in CHOICES:
        outputs = [choice_output(choice) for choice in choices]
        output = any(carries for carries, _ in outputs)
        answer = any(answers for _, answers in outputs)
        finished = any(type(c) is dict and c.get("finish_reason") for c in choices)

        state = feed(StreamState(), ({"choices": choices}, 1_000))

        assert state.failure is None, choices
        assert state.output_events == int(output), choices
        assert (state.first_answer_ns is not None) == answer, choices
        assert state.reasoning_events == int(output and not answer), choices
        assert state.finished == finished, choices


def test_ttft_counts_from_first_output_event_and_itl_from_gaps() -> None:
    state = feed(
        StreamState(),
        (delta(role="assistant"), 1_000),
        (delta(content="a"), 50_000_000),
        (delta(content="b"), 60_000_000),
        (delta(content="c"), 75_000_000),
        ({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, 75_000_001),
        ({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}, 75_000_002),
        ("[DONE]", 75_000_003),
    )
    assert state.first_output_ns == 50_000_000
    assert list(state.itl_ns) == [10_000_000, 15_000_000]
    assert state.output_tokens == 3
    assert state.completion_tokens == 3
    assert state.prompt_tokens == 7
    assert state.outcome() == (None, None)


def test_token_count_is_estimated_from_events_without_usage() -> None:
    state = feed(StreamState(), (delta(content="a"), 1), (delta(content="b"), 2), ("[DONE]", 3))
    assert state.output_tokens == 2
    assert state.completion_tokens is None


def test_truncated_stream_is_classified_truncated() -> None:
    state = feed(StreamState(), (delta(content="a"), 1))
    assert state.outcome()[0] is ErrorClass.TRUNCATED


def test_stream_without_output_is_classified_empty() -> None:
    state = feed(StreamState(), (delta(role="assistant"), 1), ("[DONE]", 2))
    assert state.outcome()[0] is ErrorClass.EMPTY


def test_malformed_json_is_a_protocol_error() -> None:
    state = feed(StreamState(), ('{"choices": [', 1))
    assert state.outcome()[0] is ErrorClass.PROTOCOL


def test_error_event_mid_stream_uses_its_code() -> None:
    state = feed(StreamState(), (delta(content="a"), 1),
                 ({"error": {"message": "overloaded", "code": 429}}, 2))
    assert state.outcome()[0] is ErrorClass.HTTP_429
    state = feed(StreamState(), ({"error": {"message": "boom"}}, 1))
    assert state.outcome()[0] is ErrorClass.HTTP_5XX


def test_message_text_reads_chat_and_completion_payloads() -> None:
    chat = {"choices": [{"message": {"role": "assistant", "content": "hi there"}}]}
    completion = {"choices": [{"text": "once upon"}]}
    assert message_text(chat) == "hi there"
    assert message_text(completion) == "once upon"


def test_a_null_error_field_is_not_an_error() -> None:
    state = feed(StreamState(), ({**delta(content="a"), "error": None}, 1), ("[DONE]", 2))
    assert state.outcome() == (None, None)


def test_implausible_usage_figures_are_ignored() -> None:
    assert token_count(12) == 12
    assert token_count(True) is None
    assert token_count(-1) is None
    assert token_count(2**40) is None
    assert token_count("7") is None
    state = feed(StreamState(), (delta(content="a"), 1),
                 ({"choices": [], "usage": {"completion_tokens": 2**40}}, 2), ("[DONE]", 3))
    assert state.output_tokens == 1
    assert state.completion_tokens is None



def test_an_expired_deadline_is_first_token_only_while_a_stream_shows_no_output() -> None:
    deadlines = Deadlines(first_token=1.0, total=5.0)
    assert deadlines.initial(True) == 1.0
    assert deadlines.initial(False) == 5.0
    assert deadlines.expired(stream=True, first_token_seen=False, now=1.0) \
        is ErrorClass.TIMEOUT_FIRST_TOKEN
    assert deadlines.expired(stream=True, first_token_seen=True, now=1.0) \
        is ErrorClass.TIMEOUT_TOTAL
    assert deadlines.expired(stream=False, first_token_seen=False, now=1.0) \
        is ErrorClass.TIMEOUT_TOTAL
    assert deadlines.expired(stream=True, first_token_seen=False, now=5.0) \
        is ErrorClass.TIMEOUT_TOTAL


def test_after_done_the_rest_of_the_body_gets_a_second_within_the_total() -> None:
    deadlines = Deadlines(first_token=1.0, total=5.0)
    assert deadlines.drain(1.0) == 2.0
    assert deadlines.drain(4.5) == 5.0


CHUNK_SHAPES = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
    {"choices": [{"index": 0, "delta": {"content": "tok"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "end"}, "finish_reason": "stop"}]},
    {"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c"}]}}]},
    {"choices": [{"index": 0, "delta": {"content": 7}}]},
    {"choices": [{"index": 0, "text": "completion"}]},
    {"choices": [{"index": 0, "delta": {"content": "a"}}, {"index": 1, "delta": {}}]},
    {"choices": ["not a dict"]},
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
]


CONTENTS = ["tok", "tok ", "", "a\nb", 'say "hi"', "back\\slash", "\u00e9t\u00e9", "\x01",
            "\u2028", "content", '"content":"x']
"""Contents a common chunk may carry: plain, empty, and ones JSON must escape, or that look
like the chunk's own text."""


def common_chunk(content: str, created: int) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": created,
            "model": "m", "choices": [{"index": 0, "logprobs": None,
                                       "delta": {"content": content}, "finish_reason": None}]}


@given(st.lists(st.one_of(
    st.tuples(st.just("shape"), st.sampled_from(range(len(CHUNK_SHAPES))), st.booleans()),
    st.tuples(st.just("common"), st.sampled_from(CONTENTS), st.sampled_from([7, 8]),
              st.booleans())), max_size=25))
def test_the_inline_read_of_a_content_chunk_counts_as_the_general_one(
        chunks: list[tuple[Any, ...]]) -> None:
    """A state that keeps its reply reads every chunk the general way; one that does not
    reads a one-choice content chunk inline, or by its stream's template without parsing
    it. Their figures must be the same, for chunks written compactly (what servers send)
    or with spaces."""
    inline, general = StreamState(), StreamState(reply=ReplyCollector())
    for n, chunk in enumerate(chunks):
        body = CHUNK_SHAPES[chunk[1]] if chunk[0] == "shape" else common_chunk(*chunk[1:3])
        compact = chunk[-1]
        event = SSEEvent("message", orjson.dumps(body).decode() if compact
                         else json.dumps(body, ensure_ascii=False))
        inline.on_event(event, 1_000 * n)
        general.on_event(event, 1_000 * n)

    def figures(state: StreamState) -> tuple[object, ...]:
        return (state.first_output_ns, state.first_answer_ns, list(state.itl_ns),
                state.last_output_ns, state.output_events, state.reasoning_events,
                state.finished, state.completion_tokens, state.failure)

    assert figures(inline) == figures(general)
