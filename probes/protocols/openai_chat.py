"""The OpenAI chat completions protocol (`POST /v1/chat/completions`), as OpenAI, vLLM,
SGLang, llama.cpp, TGI and most proxies speak it: a conversation (`messages`) in; a stream of
`choices[].delta` chunks (content, reasoning, tool-call pieces), `finish_reason` and `[DONE]`,
read by streaming.StreamState, or a whole `choices[].message` out. The request builder writes
every conversation in this shape; the other conversation kinds convert it (shapes.py).
"""

from __future__ import annotations

from typing import Any, ClassVar

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.base import ApiProtocol, RagStage
from sustain.probes.protocols.reply_collector import ReplyCollector
from sustain.probes.protocols.streaming import (
    REASONING_KEYS,
    failure,
    json_object,
    whole_measurement,
)
from sustain.probes.protocols.usage_counts import (
    cached_token_count,
    reasoning_token_count,
    token_count,
)

ANSWER_TEXT_KEYS = ("content",)
GENERATION_FIGURES = ("ttft_ms", "itl_ms", "output_tokens", "input_tokens", "cached_tokens",
                      "tool_call_ms", "ttfo_ms", "reasoning_tokens")
"""What a generation kind measures: first token and gaps of a stream, tokens counted."""


def message_text(payload: dict[str, Any], keys: tuple[str, ...] = ANSWER_TEXT_KEYS) -> str:
    """The generated text of a non-streamed chat or completions response under `keys` of
    its messages: the answer's (content, and a completion's `text`) by default, the
    reasoning's with REASONING_KEYS."""
    parts: list[str] = []
    for choice in payload.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        if isinstance(message, dict):
            for key in keys:
                if isinstance(message.get(key), str):
                    parts.append(message[key])
        if keys is ANSWER_TEXT_KEYS and isinstance(choice.get("text"), str):
            parts.append(choice["text"])
    return "".join(parts)


def tool_call_count(payload: dict[str, Any]) -> int:
    """Tool calls in a non-streamed chat response's choices (output, as text is)."""
    count = 0
    for choice in payload.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if isinstance(calls, list):
            count += len(calls)
    return count



def whole_response(raw: bytes, t_send_ns: int, end: int, status: int,
                   keep_reply: bool = False, _expect: ExpectedItems | None = None
                   ) -> Measurement:
    """Measure a non-streamed chat or completions body that ended at `end` (ns); with
    `keep_reply`, keep what it answered."""
    payload = json_object(raw)
    if isinstance(payload, str):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, payload)
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
    reply = None
    if keep_reply:
        collector = ReplyCollector()
        collector.on_whole(payload)
        reply = collector.reply()
    return whole_measurement(
        t_send_ns, end, status, text=message_text(payload), calls=tool_call_count(payload),
        completion=token_count(usage.get("completion_tokens")) if usage else None,
        prompt=token_count(usage.get("prompt_tokens")) if usage else None,
        cached=cached_token_count(usage) if usage else None, reply=reply,
        reasoning=reasoning_token_count(usage, "completion_tokens_details"),
        reasoning_text=message_text(payload, REASONING_KEYS))




class OpenAIChat(ApiProtocol):
    kind: ClassVar[ApiKind] = ApiKind.OPENAI_CHAT
    path: ClassVar[str] = "/chat/completions"
    otel_operation: ClassVar[str | None] = "chat"
    otel_provider: ClassVar[str | None] = "openai"
    conversation: ClassVar[bool] = True
    counts_prompt: ClassVar[bool] = True
    rag_stage: ClassVar[RagStage | None] = "generate"
    workload_fields: ClassVar[frozenset[str]] = frozenset({"images", "reasoning_effort"})
    figures: ClassVar[tuple[str, ...]] = GENERATION_FIGURES

    def whole(self, raw: bytes, t_send_ns: int, end: int, status: int,
              keep_reply: bool = False, expect: ExpectedItems | None = None) -> Measurement:
        return whole_response(raw, t_send_ns, end, status, keep_reply, expect)

    def shape(self, body: dict[str, Any]) -> dict[str, Any]:
        body.pop("thinking", None)  # Anthropic's spelling: chat asks `reasoning_effort`
        return body


OPENAI_CHAT = OpenAIChat()
