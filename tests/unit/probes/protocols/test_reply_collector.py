"""Keeping a reply (a session's turn, a canary): its text and tool calls, within bounds."""

from __future__ import annotations

from sustain.probes.measure.reply import MAX_REPLY_CHARS, Reply, ToolCall
from sustain.probes.protocols.openai_chat import whole_response
from sustain.probes.protocols.reply_collector import ReplyCollector


def test_streamed_tool_call_pieces_join_by_index() -> None:
    collector = ReplyCollector()
    pieces = [
        {"index": 0, "id": "call_1", "type": "function",
         "function": {"name": "search", "arguments": ""}},
        {"index": 0, "function": {"arguments": '{"q": '}},
        {"index": 1, "id": "call_2", "function": {"name": "fetch", "arguments": "{}"}},
        {"index": 0, "function": {"arguments": '"x"}'}},
    ]
    for at, piece in enumerate(pieces, start=10):
        collector.on_choice({"delta": {"tool_calls": [piece]}}, at)
    reply = collector.reply()
    assert reply.tool_calls == (ToolCall("call_1", "search", '{"q": "x"}'),
                                ToolCall("call_2", "fetch", "{}"))
    assert collector.first_tool_call_ns == 10
    assert reply.message()["tool_calls"] == [
        {"id": "call_1", "type": "function",
         "function": {"name": "search", "arguments": '{"q": "x"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}]


def test_text_is_kept_up_to_its_bound_and_says_it_was_cut() -> None:
    collector = ReplyCollector()
    for _ in range(3):
        collector.on_choice({"delta": {"content": "x" * (MAX_REPLY_CHARS // 2)}}, 0)
    reply = collector.reply()
    assert len(reply.text) == MAX_REPLY_CHARS
    assert reply.truncated


def test_a_whole_response_keeps_its_message_and_tool_calls_count_as_output() -> None:
    body = (b'{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":['
            b'{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},'
            b'"finish_reason":"tool_calls"}]}')
    kept = whole_response(body, 0, 1_000_000, 200, keep_reply=True)
    assert kept.error_class is None
    assert kept.output_tokens == 1
    assert kept.reply == Reply("", (ToolCall("c", "f", "{}"),))
    assert whole_response(body, 0, 1_000_000, 200).reply is None
    assert Reply("").message() == {"role": "assistant", "content": ""}
