"""The OpenAI Responses protocol (`POST /v1/responses`), as OpenAI, vLLM, `transformers serve`
and LiteLLM speak it: a streamed response is a series of typed events (`response.created`,
`response.output_item.added`, `response.output_text.delta`, ..., `response.completed`), each
JSON object naming its `type`; usage arrives once, in the final response object.

What counts as output (TTFT, ITL): text, refusal, reasoning and function-call argument deltas.
The stream is complete at `response.completed` or `response.incomplete` (an output cap reached:
a normal end, as finish_reason "length" is for chat); `response.failed` and `error` events fail
the request by the error's code. Timing and the Measurement are those of streaming.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.sse import SSEEvent
from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.base import ApiProtocol, RagStage
from sustain.probes.protocols.openai_chat import GENERATION_FIGURES
from sustain.probes.protocols.reply_collector import ReplyCollector
from sustain.probes.protocols.shapes import to_responses
from sustain.probes.protocols.streaming import (
    StreamState,
    failure,
    json_object,
    whole_measurement,
)
from sustain.probes.protocols.usage_counts import reasoning_token_count, token_count

OUTPUT_DELTAS = frozenset({
    "response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta",
    "response.reasoning_summary_text.delta", "response.function_call_arguments.delta"})
"""Events whose `delta` is output the model generated."""
REASONING_DELTAS = frozenset({
    "response.reasoning_text.delta", "response.reasoning_summary_text.delta"})
"""Output deltas that are the model's reasoning (or its summary), not its answer: TTFO is the
first of the others."""
TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
"""Output deltas that are the reply's text (reasoning is not kept, as for chat)."""
ENDS = frozenset({"response.completed", "response.incomplete"})
FAILED = frozenset({"response.failed", "error"})

ERROR_CODES = {
    "rate_limit_exceeded": ErrorClass.HTTP_429,
    "invalid_request_error": ErrorClass.HTTP_4XX,
    "invalid_prompt": ErrorClass.HTTP_4XX,
    "context_length_exceeded": ErrorClass.HTTP_4XX,
    "invalid_api_key": ErrorClass.HTTP_4XX,
}
"""A failed response's error code -> error class; any other code is a server error."""


def error_class_of(error: Any) -> ErrorClass:
    """The class of a Responses error object (`{code, message}`): by its code, else 5xx."""
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, str) and code.isdigit():  # "500", as some proxies send it
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool):
        return ErrorClass.HTTP_429 if code == 429 else \
            ErrorClass.HTTP_4XX if 400 <= code < 500 else ErrorClass.HTTP_5XX
    return ERROR_CODES.get(code, ErrorClass.HTTP_5XX) if isinstance(code, str) \
        else ErrorClass.HTTP_5XX


def usage_counts(usage: Any) -> tuple[int | None, int | None, int | None]:
    """(output, input, cached input) tokens of a Responses `usage` object; None for a figure
    absent or implausible (cached beyond the input)."""
    if not isinstance(usage, dict):
        return None, None, None
    prompt = token_count(usage.get("input_tokens"))
    details = usage.get("input_tokens_details")
    cached = token_count(details.get("cached_tokens")) if isinstance(details, dict) else None
    if cached is not None and prompt is not None and cached > prompt:
        cached = None
    return token_count(usage.get("output_tokens")), prompt, cached


@dataclass(slots=True)
class ResponsesStream(StreamState):
    """A streamed Responses answer, read event by event (see StreamState)."""

    calls: dict[object, int] = field(default_factory=dict)
    """A kept reply's function calls: output item (index or id) -> the call's place."""

    def on_event(self, event: SSEEvent, now_ns: int) -> None:
        payload = self.payload(event)  # some servers end with [DONE], as for chat
        if payload is None:
            return
        kind = payload.get("type")
        if not isinstance(kind, str):
            if payload.get("error") is not None:  # a chat-style error, as some proxies send
                self.fail(error_class_of(payload["error"]), "error in stream")
                return
            kind = event.event
        if kind in OUTPUT_DELTAS:
            delta = payload.get("delta")
            if isinstance(delta, str) and delta:
                self.output_at(now_ns, answer=kind not in REASONING_DELTAS)
                if self.reply is not None:
                    self._keep(kind, payload, delta, now_ns)
        elif kind == "response.output_item.added" and self.reply is not None:
            item = payload.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                self.reply.add_tool_call({"index": self._call_index(payload, item),
                                          "id": item.get("call_id") or item.get("id"),
                                          "function": {"name": item.get("name")}}, None)
        elif kind in ENDS:
            response = payload.get("response")
            usage = response.get("usage") if isinstance(response, dict) else None
            self.counted(*usage_counts(usage))
            self.counted_reasoning(reasoning_token_count(usage, "output_tokens_details"))
            self.finished = self.done = True
        elif kind in FAILED:
            response = payload.get("response")
            error = response.get("error") if isinstance(response, dict) else payload
            self.fail(error_class_of(error), f"{kind} event in stream")

    def _call_index(self, payload: dict[str, Any], item: dict[str, Any]) -> int:
        """A function call's place among the reply's calls, by its output item."""
        key = payload.get("output_index", item.get("id"))
        return self.calls.setdefault(key if isinstance(key, (int, str)) else None,
                                     len(self.calls))

    def _keep(self, kind: str, payload: dict[str, Any], delta: str, now_ns: int) -> None:
        assert self.reply is not None
        if kind in TEXT_DELTAS:
            self.reply.add_text(delta)
        elif kind == "response.function_call_arguments.delta":
            key = payload.get("output_index", payload.get("item_id"))
            index = self.calls.get(key if isinstance(key, (int, str)) else None, 0)
            self.reply.add_tool_call({"index": index, "function": {"arguments": delta}},
                                     now_ns)


def reasoning_of(payload: dict[str, Any]) -> str:
    """A whole response's reasoning text: its reasoning items' content and summary texts."""
    parts: list[str] = []
    output = payload.get("output")
    for item in output if isinstance(output, list) else []:
        if not isinstance(item, dict) or item.get("type") != "reasoning":
            continue
        for key in ("content", "summary"):
            pieces = item.get(key)
            for part in pieces if isinstance(pieces, list) else []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    parts.append(part["text"])
    return " ".join(parts)


def output_of(payload: dict[str, Any]) -> tuple[str, int, ReplyCollector]:
    """A whole response's text, its count of function calls, and both as a reply."""
    collector = ReplyCollector()
    calls = 0
    output = payload.get("output")
    for item in output if isinstance(output, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            content = item.get("content")
            for part in content if isinstance(content, list) else []:
                if isinstance(part, dict) and part.get("type") in ("output_text", "refusal"):
                    collector.add_text(part.get("text") or part.get("refusal"))
        elif item.get("type") == "function_call":
            collector.add_tool_call({"index": calls, "id": item.get("call_id"),
                                     "function": {"name": item.get("name"),
                                                  "arguments": item.get("arguments")}}, None)
            calls += 1
    return "".join(collector.parts), calls, collector


def whole_response(raw: bytes, t_send_ns: int, end: int, status: int,
                   keep_reply: bool = False, _expect: ExpectedItems | None = None
                   ) -> Measurement:
    """Measure a non-streamed Responses body that ended at `end` (ns); a body whose status
    is `failed` fails by its error's code."""
    payload = json_object(raw)
    if isinstance(payload, str):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, payload)
    if payload.get("status") == "failed" or payload.get("error"):
        return failure(t_send_ns, status, error_class_of(payload.get("error")),
                       "response failed")
    text, calls, collector = output_of(payload)
    completion, prompt, cached = usage_counts(payload.get("usage"))
    return whole_measurement(
        t_send_ns, end, status, text=text, calls=calls, completion=completion, prompt=prompt,
        cached=cached, reply=collector.reply() if keep_reply else None,
        reasoning=reasoning_token_count(payload.get("usage"), "output_tokens_details"),
        reasoning_text=reasoning_of(payload))


class OpenAIResponses(ApiProtocol):
    kind: ClassVar[ApiKind] = ApiKind.OPENAI_RESPONSES
    path: ClassVar[str] = "/responses"
    otel_operation: ClassVar[str | None] = "chat"
    otel_provider: ClassVar[str | None] = "openai"
    stream_type: ClassVar[type[StreamState]] = ResponsesStream
    conversation: ClassVar[bool] = True
    counts_prompt: ClassVar[bool] = True
    rag_stage: ClassVar[RagStage | None] = "generate"
    workload_fields: ClassVar[frozenset[str]] = frozenset({"images", "reasoning_effort"})
    figures: ClassVar[tuple[str, ...]] = GENERATION_FIGURES

    def whole(self, raw: bytes, t_send_ns: int, end: int, status: int,
              keep_reply: bool = False, expect: ExpectedItems | None = None) -> Measurement:
        return whole_response(raw, t_send_ns, end, status, keep_reply, expect)

    def shape(self, body: dict[str, Any]) -> dict[str, Any]:
        return to_responses(body)


OPENAI_RESPONSES = OpenAIResponses()
