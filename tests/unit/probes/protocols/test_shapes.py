"""A conversation written the chat way is converted to the Responses and Anthropic shapes:
tool calls and their results paired by id, tools and tool_choice in each protocol's names,
Anthropic's system prompt apart and its user turns merged so roles alternate."""

from __future__ import annotations

from typing import Any

from sustain.probes.client.target import ApiKind
from sustain.probes.protocols.registry import protocol_of

TOOL = {"type": "function", "function": {"name": "search", "description": "Search docs",
                                         "parameters": {"type": "object", "required": ["q"]}}}
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "search", "arguments": '{"q": "kv cache"}'}}


def conversation() -> dict[str, Any]:
    return {"model": "m", "max_tokens": 16, "stream": True,
            "stream_options": {"include_usage": True}, "tools": [TOOL],
            "tool_choice": {"type": "function", "function": {"name": "search"}},
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Find it."},
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_1", "content": "Found: evictions."},
                {"role": "user", "content": "Summarise."}]}


def test_responses_pairs_function_calls_and_outputs_by_call_id() -> None:
    body = shaped(conversation(), ApiKind.OPENAI_RESPONSES)
    assert body["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Find it."},
        {"type": "function_call", "call_id": "call_1", "name": "search",
         "arguments": '{"q": "kv cache"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "Found: evictions."},
        {"role": "user", "content": "Summarise."}]
    assert body["tools"] == [{"type": "function", "name": "search",
                              "description": "Search docs",
                              "parameters": {"type": "object", "required": ["q"]}}]
    assert body["tool_choice"] == {"type": "function", "name": "search"}
    assert body["max_output_tokens"] == 16
    assert "messages" not in body
    assert "stream_options" not in body


def test_responses_keeps_an_assistants_text_before_its_calls() -> None:
    body = conversation()
    body["messages"][2]["content"] = "Let me look."
    items = shaped(body, ApiKind.OPENAI_RESPONSES)["input"]
    assert items[2:4] == [{"role": "assistant", "content": "Let me look."},
                          {"type": "function_call", "call_id": "call_1", "name": "search",
                           "arguments": '{"q": "kv cache"}'}]


def test_anthropic_answers_a_tool_use_with_a_result_leading_the_next_user_turn() -> None:
    body = shaped(conversation(), ApiKind.ANTHROPIC_MESSAGES)
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {"role": "user", "content": "Find it."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_1", "name": "search",
             "input": {"q": "kv cache"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "Found: evictions."},
            {"type": "text", "text": "Summarise."}]}]
    assert body["tools"] == [{"name": "search", "description": "Search docs",
                              "input_schema": {"type": "object", "required": ["q"]}}]
    assert body["tool_choice"] == {"type": "tool", "name": "search"}


def test_anthropic_tool_choice_names() -> None:
    for chat, anthropic in (("auto", {"type": "auto"}), ("none", {"type": "none"}),
                            ("required", {"type": "any"})):
        body = conversation() | {"tool_choice": chat}
        assert shaped(body, ApiKind.ANTHROPIC_MESSAGES)["tool_choice"] == anthropic
        assert shaped(conversation() | {"tool_choice": chat},
                      ApiKind.OPENAI_RESPONSES)["tool_choice"] == chat


def test_a_truncated_calls_arguments_become_an_empty_input() -> None:
    body = conversation()
    body["messages"][2]["tool_calls"] = [
        {**CALL, "function": {"name": "search", "arguments": '{"q": "kv'}}]
    messages = shaped(body, ApiKind.ANTHROPIC_MESSAGES)["messages"]
    assert messages[1]["content"][0]["input"] == {}


def test_chat_bodies_are_left_as_they_are() -> None:
    assert shaped(conversation(), ApiKind.OPENAI_CHAT) == conversation()


def shaped(body: dict[str, Any], kind: ApiKind) -> dict[str, Any]:
    """`body` in the shape of `kind`'s protocol (its object's `shape`)."""
    return protocol_of(kind).shape(body)
