"""The Anthropic Messages protocol (`POST /v1/messages`), as Anthropic, llama.cpp's server,
vLLM and LiteLLM speak it: the key goes in `x-api-key` (not a bearer token) beside an
`anthropic-version` header, and a streamed answer is a series of named events: `message_start`
(the input usage), `content_block_start`, `content_block_delta` (text, tool input JSON,
thinking), `content_block_stop`, `message_delta` (stop reason and the output usage so far),
`message_stop`, with `ping`s anywhere and an `error` event possible mid-stream.

What counts as output (TTFT, ITL): text, thinking and tool-input deltas. The stream is complete
at `message_stop`. Anthropic counts the input served from its cache apart from `input_tokens`,
so the prompt is their sum (`input_tokens` + `cache_read_input_tokens` +
`cache_creation_input_tokens`) and the cached part is `cache_read_input_tokens`. Timing and the
Measurement are those of streaming.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.sse import SSEEvent
from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.base import ApiProtocol, RagStage
from sustain.probes.protocols.openai_chat import GENERATION_FIGURES
from sustain.probes.protocols.reply_collector import ReplyCollector
from sustain.probes.protocols.shapes import to_anthropic
from sustain.probes.protocols.streaming import (
    StreamState,
    failure,
    json_object,
    whole_measurement,
)
from sustain.probes.protocols.usage_counts import token_count

VERSION_HEADER = "anthropic-version"
API_VERSION = "2023-06-01"
"""The version every current Messages server accepts; an endpoint's own header overrides it."""
KEY_HEADER = "x-api-key"

OUTPUT_DELTAS = {"text_delta": "text", "thinking_delta": "thinking",
                 "input_json_delta": "partial_json"}
"""content_block_delta types that carry output, and the key of their text."""

ERROR_TYPES = {
    "rate_limit_error": ErrorClass.HTTP_429,
    "invalid_request_error": ErrorClass.HTTP_4XX,
    "authentication_error": ErrorClass.HTTP_4XX,
    "permission_error": ErrorClass.HTTP_4XX,
    "not_found_error": ErrorClass.HTTP_4XX,
    "request_too_large": ErrorClass.HTTP_4XX,
}
"""An error event's `error.type` -> error class; any other (`overloaded_error`, `api_error`)
is a server error."""


def error_class_of(payload: Any) -> ErrorClass:
    error = payload.get("error") if isinstance(payload, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    return ERROR_TYPES.get(kind, ErrorClass.HTTP_5XX) if isinstance(kind, str) \
        else ErrorClass.HTTP_5XX


def input_counts(usage: Any) -> tuple[int | None, int | None]:
    """(prompt, cached) tokens of a Messages `usage` object: the prompt is the sum of the
    uncached, cache-read and cache-written input; None where the server gave no input count."""
    if not isinstance(usage, dict):
        return None, None
    uncached = token_count(usage.get("input_tokens"))
    if uncached is None:
        return None, None
    read = token_count(usage.get("cache_read_input_tokens"))
    written = token_count(usage.get("cache_creation_input_tokens")) or 0
    return token_count(uncached + (read or 0) + written), read


@dataclass(slots=True)
class MessagesStream(StreamState):
    """A streamed Messages answer, read event by event (see StreamState)."""

    def on_event(self, event: SSEEvent, now_ns: int) -> None:
        payload = self.payload(event, done_marker=False)  # Anthropic sends no [DONE]
        if payload is None:
            return
        kind = payload.get("type")
        if not isinstance(kind, str):
            kind = event.event
        if kind == "content_block_delta":
            self._on_delta(payload, now_ns)
        elif kind == "content_block_start" and self.reply is not None:
            block = payload.get("content_block")
            if isinstance(block, dict) and block.get("type") == "tool_use":
                self.reply.add_tool_call({"index": len(self.reply.calls), "id": block.get("id"),
                                          "function": {"name": block.get("name")}}, None)
        elif kind == "message_start":
            message = payload.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            self.counted(None, *input_counts(usage))
        elif kind == "message_delta":
            usage = payload.get("usage")
            prompt, cached = input_counts(usage)
            self.counted(token_count(usage.get("output_tokens")) if isinstance(usage, dict)
                         else None, prompt, cached)
            delta = payload.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason"):
                self.finished = True
        elif kind == "message_stop":
            self.finished = self.done = True
        elif kind == "error":
            self.fail(error_class_of(payload), "error event in stream")

    def _on_delta(self, payload: dict[str, Any], now_ns: int) -> None:
        delta = payload.get("delta")
        if not isinstance(delta, dict):
            return
        key = OUTPUT_DELTAS.get(delta.get("type"))  # type: ignore[arg-type]
        piece = delta.get(key) if key is not None else None
        if not isinstance(piece, str) or not piece:
            return
        self.output_at(now_ns, answer=key != "thinking")
        if self.reply is None:
            return
        if key == "text":
            self.reply.add_text(piece)
        elif key == "partial_json":
            self.reply.add_tool_call({"index": max(len(self.reply.calls) - 1, 0),
                                      "function": {"arguments": piece}}, now_ns)


def thinking_of(payload: dict[str, Any]) -> str:
    """A whole message's thinking text (its `thinking` blocks). Anthropic's usage does not
    count thinking apart from output, so its reasoning tokens are estimated from it."""
    content = payload.get("content")
    return " ".join(block["thinking"] for block in content if isinstance(block, dict)
                    and block.get("type") == "thinking"
                    and isinstance(block.get("thinking"), str)) \
        if isinstance(content, list) else ""


def content_of(payload: dict[str, Any]) -> tuple[str, int, ReplyCollector]:
    """A whole message's text, its count of tool uses, and both as a reply."""
    collector = ReplyCollector()
    calls = 0
    content = payload.get("content")
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            collector.add_text(block.get("text"))
        elif block.get("type") == "tool_use":
            collector.add_tool_call({"index": calls, "id": block.get("id"), "function": {
                "name": block.get("name"), "arguments": block.get("input")}}, None)
            calls += 1
    return "".join(collector.parts), calls, collector


def whole_response(raw: bytes, t_send_ns: int, end: int, status: int,
                   keep_reply: bool = False, _expect: ExpectedItems | None = None
                   ) -> Measurement:
    """Measure a non-streamed Messages body that ended at `end` (ns)."""
    payload = json_object(raw)
    if isinstance(payload, str):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, payload)
    if payload.get("type") == "error":
        return failure(t_send_ns, status, error_class_of(payload), "error response")
    text, calls, collector = content_of(payload)
    usage = payload.get("usage")
    prompt, cached = input_counts(usage)
    completion = token_count(usage.get("output_tokens")) if isinstance(usage, dict) else None
    return whole_measurement(t_send_ns, end, status, text=text, calls=calls,
                             completion=completion, prompt=prompt, cached=cached,
                             reply=collector.reply() if keep_reply else None,
                             reasoning_text=thinking_of(payload))


class AnthropicMessages(ApiProtocol):
    kind: ClassVar[ApiKind] = ApiKind.ANTHROPIC_MESSAGES
    path: ClassVar[str] = "/messages"
    otel_operation: ClassVar[str | None] = "chat"
    otel_provider: ClassVar[str | None] = "anthropic"
    stream_type: ClassVar[type[StreamState]] = MessagesStream
    headers: ClassVar[tuple[tuple[str, str], ...]] = ((VERSION_HEADER, API_VERSION),)
    conversation: ClassVar[bool] = True
    counts_prompt: ClassVar[bool] = True
    rag_stage: ClassVar[RagStage | None] = "generate"
    workload_fields: ClassVar[frozenset[str]] = frozenset({"images",
                                                           "thinking_budget_tokens"})
    figures: ClassVar[tuple[str, ...]] = GENERATION_FIGURES

    def auth(self, secret: str) -> dict[str, str]:
        return {KEY_HEADER: secret}

    def whole(self, raw: bytes, t_send_ns: int, end: int, status: int,
              keep_reply: bool = False, expect: ExpectedItems | None = None) -> Measurement:
        return whole_response(raw, t_send_ns, end, status, keep_reply, expect)

    def shape(self, body: dict[str, Any]) -> dict[str, Any]:
        return to_anthropic(body)


ANTHROPIC_MESSAGES = AnthropicMessages()
