"""Reasoning figures an endpoint reports, read as hostile: a usage whose reasoning tokens are
more than the output they are part of, negative, past 64 bits, not a number, or detailed in a
list, and a stream whose reasoning deltas outnumber the output tokens its usage claims. Over
loopback HTTP through both transports, for every protocol that reports reasoning (OpenAI chat,
Responses, Anthropic Messages), streamed and whole: the sample is never lost, and its
reasoning tokens are either the server's plausible count or an estimate, never more than its
output tokens (so its answer tokens and reasoning share stay within their ranges)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import SingleProfile
from sustain.probes.measure.sample import Measurement
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload

TRANSPORTS = pytest.mark.parametrize("http2", [False, True], ids=["lean-http1", "httpx"])
THOUGHTS = 3
"""Reasoning deltas of every streamed answer here (then two answer deltas)."""


@asynccontextmanager
async def answering(body: bytes, content_type: bytes) -> AsyncIterator[str]:
    """A server answering every request with `body`: its base URL."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: " + content_type
                             + b"\r\ncontent-length: " + str(len(body)).encode()
                             + b"\r\n\r\n" + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with listener:
        yield f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/v1"
        listener.close()


async def sample(body: bytes, kind: ApiKind, stream: bool, http2: bool) -> Measurement:
    content_type = b"text/event-stream" if stream else b"application/json"
    async with answering(body, content_type) as base_url, HttpClients() as clients:
        result = await execute(clients, Target(base_url=base_url, api_kind=kind, model="m",
                                               http2=http2),
                               Workload(prompt="think", stream=stream), SingleProfile())
    (one,) = result.samples
    return one.measurement


def sse(*payloads: Any, named: bool = False) -> bytes:
    """An event stream of `payloads` (named by their `type` where `named`)."""
    return b"".join((b"event: " + payload["type"].encode() + b"\n" if named else b"")
                    + b"data: " + (payload if isinstance(payload, bytes)
                                   else json.dumps(payload).encode()) + b"\n\n"
                    for payload in payloads)


def chat_stream(*usages: dict[str, Any]) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return sse(*(chunk({"reasoning_content": f"t{k} "}) for k in range(THOUGHTS)),
               chunk({"content": "the "}), chunk({"content": "answer"}, "stop"),
               *({"choices": [], "usage": usage} for usage in usages), b"[DONE]")


def responses_stream(usage: dict[str, Any]) -> bytes:
    return sse(*({"type": "response.reasoning_text.delta", "delta": f"t{k} "}
                 for k in range(THOUGHTS)),
               {"type": "response.output_text.delta", "delta": "the answer"},
               {"type": "response.completed", "response": {"status": "completed",
                                                           "usage": usage}})


def messages_stream(output_tokens: int) -> bytes:
    def delta(kind: str, key: str, text: str) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": 0,
                "delta": {"type": kind, key: text}}
    return sse(*(delta("thinking_delta", "thinking", f"t{k} ") for k in range(THOUGHTS)),
               delta("text_delta", "text", "the answer"),
               {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": output_tokens}},
               {"type": "message_stop"}, named=True)


def usage(completion: int, reasoning: Any, *, key: str = "completion_tokens") -> dict[str, Any]:
    return {"prompt_tokens": 4, key: completion,
            f"{key}_details": {"reasoning_tokens": reasoning}}


def assert_plausible(m: Measurement) -> None:
    """A sample kept, whose reasoning is part of its output."""
    assert m.error_class is None
    assert m.reasoning_tokens is None or 0 < m.reasoning_tokens <= m.output_tokens
    assert 0 <= m.answer_tokens <= m.output_tokens
    share = m.reasoning_share
    assert share is None or 0 <= share <= 1


@TRANSPORTS
@pytest.mark.parametrize("reasoning", [9, 2**31 - 1, -1, 2**70, True, "7", 7.5, None, [3]],
                         ids=["over-the-output", "int32-max", "negative", "past-64-bits",
                              "bool", "string", "fraction", "null", "list"])
async def test_a_chat_streams_implausible_reasoning_count_gives_way_to_its_deltas(
        reasoning: Any, http2: bool) -> None:
    m = await sample(chat_stream(usage(5, reasoning)), ApiKind.OPENAI_CHAT, True, http2)
    assert_plausible(m)
    assert (m.output_tokens, m.tokens_server_counted) == (5, True)
    assert (m.reasoning_tokens, m.reasoning_server_counted) == (THOUGHTS, False)


@TRANSPORTS
@pytest.mark.parametrize("details", [[{"reasoning_tokens": 2}], "2", 2, None],
                         ids=["list", "string", "number", "null"])
async def test_a_chat_stream_whose_usage_details_are_no_object_counts_its_deltas(
        details: Any, http2: bool) -> None:
    m = await sample(chat_stream({"completion_tokens": 5, "completion_tokens_details": details}),
                     ApiKind.OPENAI_CHAT, True, http2)
    assert_plausible(m)
    assert (m.reasoning_tokens, m.reasoning_server_counted) == (THOUGHTS, False)


@TRANSPORTS
async def test_a_chat_streams_reasoning_count_is_checked_against_its_last_output_count(
        http2: bool) -> None:
    """Usage reported twice: reasoning 900 of 1,000 tokens, then the output alone, 5."""
    m = await sample(chat_stream(usage(1000, 900), {"completion_tokens": 5}),
                     ApiKind.OPENAI_CHAT, True, http2)
    assert_plausible(m)
    assert (m.output_tokens, m.reasoning_tokens, m.reasoning_server_counted) == \
        (5, THOUGHTS, False)


@TRANSPORTS
async def test_a_chat_stream_of_more_thoughts_than_its_counted_output_caps_them(
        http2: bool) -> None:
    m = await sample(chat_stream({"completion_tokens": 2}), ApiKind.OPENAI_CHAT, True, http2)
    assert_plausible(m)
    assert (m.output_tokens, m.reasoning_tokens, m.reasoning_server_counted) == (2, 2, False)


@TRANSPORTS
async def test_a_chat_stream_that_only_thought_keeps_its_whole_count(http2: bool) -> None:
    m = await sample(chat_stream(usage(5, 5)), ApiKind.OPENAI_CHAT, True, http2)
    assert_plausible(m)
    assert (m.reasoning_tokens, m.reasoning_server_counted, m.answer_tokens) == (5, True, 0)


@TRANSPORTS
@pytest.mark.parametrize(("reasoning", "server"), [(12, None), (-3, None), (2**70, None),
                                                   (4, 4)],
                         ids=["over-the-output", "negative", "past-64-bits", "plausible"])
async def test_a_whole_chat_answers_reasoning_count_is_kept_only_when_plausible(
        reasoning: Any, server: int | None, http2: bool) -> None:
    body = json.dumps({"choices": [{"message": {
        "content": "the answer", "reasoning_content": "one two three four five six"}}],
        "usage": usage(5, reasoning)}).encode()
    m = await sample(body, ApiKind.OPENAI_CHAT, False, http2)
    assert_plausible(m)
    assert m.output_tokens == 5
    # the reasoning text's six words, within the five tokens of output
    assert (m.reasoning_tokens, m.reasoning_server_counted) == \
        ((server, True) if server is not None else (5, False))


@TRANSPORTS
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_a_responses_reasoning_count_over_its_output_is_not_the_servers(
        stream: bool, http2: bool) -> None:
    counted = usage(4, 100, key="output_tokens") | {"input_tokens": 2}
    body = responses_stream(counted) if stream else json.dumps({
        "status": "completed", "usage": counted, "output": [
            {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "a b c"}]},
            {"type": "message", "content": [{"type": "output_text", "text": "yes"}]}]}
    ).encode()
    m = await sample(body, ApiKind.OPENAI_RESPONSES, stream, http2)
    assert_plausible(m)
    assert (m.output_tokens, m.reasoning_tokens, m.reasoning_server_counted) == \
        (4, 3, False)


@TRANSPORTS
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_anthropic_thinking_past_its_counted_output_is_capped_at_it(
        stream: bool, http2: bool) -> None:
    body = messages_stream(2) if stream else json.dumps({
        "type": "message", "content": [
            {"type": "thinking", "thinking": " ".join(["hmm"] * 100)},
            {"type": "text", "text": "the answer"}],
        "usage": {"input_tokens": 1, "output_tokens": 2}}).encode()
    m = await sample(body, ApiKind.ANTHROPIC_MESSAGES, stream, http2)
    assert_plausible(m)
    assert (m.output_tokens, m.reasoning_tokens, m.reasoning_server_counted) == (2, 2, False)
