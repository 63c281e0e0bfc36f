"""The shared base of every protocol, apart from any transport: how a JSON request is encoded,
a request's deadlines and how an expired one is classified, the stream state that reads an
OpenAI-style chunk stream event by event (and that the other protocols' readers extend: see
openai_responses.py, anthropic_messages.py, openai_transcriptions.py), the reply collector,
and the Measurement builders. base.py says what one API kind provides, registry.py which
kind a target speaks; the transports (client/http1.py, client/httpx_transport.py) move bytes
and call into these modules, so both measure exactly the same way.

Units: event timestamps are `time.perf_counter_ns()` readings (ns); deadlines are event loop
times (`loop.time()`, s); Measurement fields are ms from t_send.
"""

from __future__ import annotations

import asyncio
import json
import time
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from itertools import repeat
from operator import truediv
from typing import Any

import orjson

from sustain.probes.client.sse import SSEEvent, size_text
from sustain.probes.client.status import error_class_for_status
from sustain.probes.client.target import Target
from sustain.probes.client.trace_context import traced
from sustain.probes.measure.reply import Reply
from sustain.probes.measure.sample import NS_PER_MS, ErrorClass, Measurement
from sustain.probes.protocols.chunk_template import ContentTemplate, learn
from sustain.probes.protocols.reply_collector import ReplyCollector
from sustain.probes.protocols.usage_counts import (
    cached_token_count,
    estimated_reasoning,
    plausible_reasoning,
    reasoning_token_count,
    token_count,
)

# --- requests -------------------------------------------------------------------------------

EncodedRequest = tuple[bytes, dict[str, str]]
"""A request body serialised to JSON, and the headers to send with it."""


def encode_request(body: Mapping[str, Any], headers: Mapping[str, str]) -> EncodedRequest:
    """Serialise before t_send, so JSON encoding is not counted as endpoint latency. orjson,
    several times faster than the standard library on large bodies (an image's megabyte of
    base64 takes it a fraction of a millisecond on the loop that times other requests); an
    integer past 64 bits, which orjson refuses, falls back to the standard library. The
    headers carry a fresh W3C traceparent (client/trace_context.py), made here for the same
    reason."""
    try:
        payload = orjson.dumps(body)
    except TypeError:
        payload = json.dumps(body, separators=(",", ":")).encode()
    return payload, traced({
        **headers, "content-type": "application/json", "accept": "text/event-stream"
        if body.get("stream") else "application/json"})


# --- deadlines ------------------------------------------------------------------------------

DRAIN_S = 1.0
"""After [DONE], how long to wait for the end of the body before giving up the connection."""
ERROR_BODY_LIMIT = 65_536
"""Bytes of an error response read before giving up the connection."""
WHOLE_BODY_LIMIT = 16 * 1024 * 1024
"""Bytes of a non-streamed response body: past them the request ends at once as `protocol`
(BODY_TOO_LARGE), without reading the rest. The body is parsed as JSON on the event loop that
times every other request, so its size must be bounded; a chat or completion response is
rarely over a few hundred KiB."""
BODY_TOO_LARGE = f"response body over {size_text(WHOLE_BODY_LIMIT)}"
DEADLINE_EXCEEDED = "deadline exceeded"


@dataclass(frozen=True, slots=True)
class Deadlines:
    """A request's first-token and total deadlines, as event loop times (s), counted from
    t_send rather than from when the sender got to run. There are no retries: a measured
    request is sent exactly once, under these deadlines (and the transport's connect one)."""

    first_token: float
    total: float

    @classmethod
    def from_t_send(cls, target: Target, t_send_ns: int, loop: asyncio.AbstractEventLoop
                    ) -> Deadlines:
        start = loop.time() - (time.perf_counter_ns() - t_send_ns) / 1e9
        total = start + target.timeout_total_s
        return cls(first_token=min(start + target.timeout_first_token_s, total), total=total)

    def initial(self, stream: bool) -> float:
        """The deadline armed at send: first token for a stream, total for a whole response.
        Once the first output arrives, the stream's deadline moves to `total`."""
        return self.first_token if stream else self.total

    def drain(self, now: float) -> float:
        """The deadline once [DONE] arrived at loop time `now`: the rest of the body gets up to
        DRAIN_S, within the total deadline."""
        return min(self.total, now + DRAIN_S)

    def expired(self, *, stream: bool, first_token_seen: bool, now: float) -> ErrorClass:
        """The error class of a deadline that fired at loop time `now`, before the response
        was complete: the first-token one only while a stream has shown no output yet."""
        if not stream or first_token_seen or now >= self.total:
            return ErrorClass.TIMEOUT_TOTAL
        return ErrorClass.TIMEOUT_FIRST_TOKEN


# --- responses ------------------------------------------------------------------------------

MAX_OUTPUT_EVENTS = 2_097_152
"""Most output-bearing events of one streamed answer, each an inter-token gap held until the
answer ends (8 bytes each: 16 MiB at most): twice the most tokens a workload may ask for
(`max_tokens` up to 1,000,000, one event each, as vLLM and SGLang stream them). Past it the
answer is `protocol`, so a stream of endless tiny chunks cannot grow the probe's memory
without end (3 M one-token chunks in 20 s held 163 MiB before this bound)."""
ANSWER_KEYS = ("content", "tool_calls")
"""A chat delta's keys that carry the answer (TTFO)."""
REASONING_KEYS = ("reasoning_content", "reasoning")
"""A chat delta's keys that carry reasoning, in both spellings servers use (vLLM, SGLang and
DeepSeek `reasoning_content`; OpenRouter, Ollama and newer vLLM `reasoning`)."""
OUTPUT_KEYS = (*ANSWER_KEYS, *REASONING_KEYS)
EVENT_STREAM = "text/event-stream"
NOT_EVENT_STREAM = "stream is not text/event-stream"
INVALID_UTF8 = "invalid UTF-8 in stream"


def is_event_stream(content_type: str) -> bool:
    """Whether a 2xx response to a streamed request is SSE; anything else but JSON
    (`is_whole_answer`) is a protocol error."""
    return content_type.startswith(EVENT_STREAM)


def is_whole_answer(content_type: str) -> bool:
    """Whether a 2xx response to a streamed request is one JSON body: a server that ignores
    `stream: true` (OpenAI's whisper-1, some chat gateways). It is read as a whole answer
    (`answered_whole`), within the same WHOLE_BODY_LIMIT as a non-streamed one."""
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def _carries(delta: dict[str, Any], keys: tuple[str, ...]) -> bool:
    for key in keys:
        value = delta.get(key)
        if value and isinstance(value, (str, list)):
            return True
    return False


def choice_output(choice: Any) -> tuple[bool, bool]:
    """(output, answer) of a streamed choice: whether it carries output at all (content,
    reasoning or tool-call deltas for chat, text for completions; role-only does not), and
    whether that output is answer rather than reasoning."""
    if type(choice) is not dict:
        return False, False
    delta = choice.get("delta")
    if type(delta) is dict:
        content = delta.get("content")  # the common chunk's, read first: once per token
        if content and type(content) is str:
            return True, True
        if _carries(delta, ANSWER_KEYS):
            return True, True
        if _carries(delta, REASONING_KEYS):
            return True, False
    text = choice.get("text")
    output = bool(text) and isinstance(text, str)
    return output, output


def choice_has_output(choice: Any) -> bool:
    """Content, reasoning or tool-call deltas (chat), text (completions); role-only is not."""
    return choice_output(choice)[0]


@dataclass(slots=True)
class StreamState:
    """Accumulates a streamed response's events; timestamps in ns from the monotonic clock."""

    first_output_ns: int | None = None
    first_answer_ns: int | None = None
    """When the first answer output (not reasoning) arrived: TTFO."""
    last_output_ns: int | None = None
    itl_ns: array[int] = field(default_factory=lambda: array("q"))
    """The gaps between output events, in ns (a packed array: 8 bytes a gap)."""
    output_events: int = 0
    finished: bool = False
    done: bool = False
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_events: int = 0
    """Output events that carried reasoning only."""
    reasoning_counted: int | None = None
    """Reasoning tokens the server's usage reported, if it did."""
    failure: ErrorClass | None = None
    detail: str | None = None
    reply: ReplyCollector | None = None
    """Set for a request that keeps its reply; None (the default) keeps no text."""
    template: ContentTemplate | None = None
    """This stream's common chunk around its content (chunk_template.py), once read."""

    def payload(self, event: SSEEvent, *, done_marker: bool = True) -> dict[str, Any] | None:
        """An event's JSON object, or None when there is nothing (more) to read in it: the
        stream already failed or ended, the event is `[DONE]` (which ends it, where the
        protocol uses it: `done_marker`), or its data is not a JSON object (which fails the
        stream as `protocol`). Every protocol's reader starts here."""
        if self.failure is not None or self.done:
            return None
        if done_marker and event.data == "[DONE]":
            self.done = True
            return None
        try:
            payload = orjson.loads(event.data)
        except (ValueError, RecursionError):
            self.fail(ErrorClass.PROTOCOL, "malformed JSON in SSE data")
            return None
        if not isinstance(payload, dict):
            self.fail(ErrorClass.PROTOCOL, "SSE data is not a JSON object")
            return None
        return payload

    def typed(self, event: SSEEvent, classify: Callable[[Any], ErrorClass]
              ) -> tuple[Any, dict[str, Any]] | None:
        """An OpenAI typed event's `type` and payload (the media and transcription streams),
        or None when there is nothing to read in it (as `payload`) or it is an error (an
        `error` object, or `type: error`), which fails the stream by `classify`."""
        payload = self.payload(event)
        if payload is None:
            return None
        if payload.get("error") is not None or payload.get("type") == "error":
            self.fail(classify(payload.get("error", payload)), "error event in stream")
            return None
        return payload.get("type"), payload

    def on_event(self, event: SSEEvent, now_ns: int) -> None:
        """A chat or completions chunk (once per token of every stream measured). The common
        chunk, one choice whose delta carries content, is read inline: what choice_output and
        output_at make of it, without their two calls a token; one that fits the stream's
        template is counted so without being parsed (chunk_template.py)."""
        template = self.template
        if template is not None and template.fits(event.data) and self.failure is None \
                and not self.done and self.output_events < MAX_OUTPUT_EVENTS:
            self._content_at(now_ns)
            return
        payload = self.payload(event)
        if payload is None:
            return
        get = payload.get
        if get("error") is not None:
            self._on_error(payload["error"])
            return
        usage = get("usage")
        if usage:
            self._on_usage(usage)
        choices = get("choices")
        if not choices:
            return
        if type(choices) is not list:
            self.fail(ErrorClass.PROTOCOL, "choices is not a list")
            return
        if len(choices) == 1 and self.reply is None and self.output_events < MAX_OUTPUT_EVENTS:
            choice = choices[0]
            delta = choice.get("delta") if type(choice) is dict else None
            content = delta.get("content") if type(delta) is dict else None
            if content and type(content) is str:
                self._content_at(now_ns)
                if choice.get("finish_reason"):
                    self.finished = True
                elif not usage:
                    self.template = learn(event.data, content) or template
                return
        output = answer = finished = False
        for choice in choices:
            if not answer:
                carries, answers = choice_output(choice)
                output, answer = output or carries, answers
            if type(choice) is dict and choice.get("finish_reason"):
                finished = True
        if self.reply is not None:
            self.reply.on_choice(choices[0], now_ns)
        if output:
            self.output_at(now_ns, answer=answer)
        if finished:
            self.finished = True

    def _content_at(self, now_ns: int) -> None:
        """An answer output event (the common chunk's content) at `now_ns`: what output_at
        does for it, once under MAX_OUTPUT_EVENTS is known."""
        last = self.last_output_ns
        if last is None:
            self.first_output_ns = now_ns
        else:
            self.itl_ns.append(now_ns - last)
        self.last_output_ns = now_ns
        self.output_events += 1
        if self.first_answer_ns is None:
            self.first_answer_ns = now_ns

    def output_at(self, now_ns: int, *, answer: bool = True) -> None:
        """An output-bearing event arrived at `now_ns`: the first one is TTFT, each later one
        adds the gap since the one before to ITL (reasoning and answer alike, as MLPerf
        times them); the first answer one is TTFO, a reasoning one counts as a reasoning
        token where the server reports none. Past MAX_OUTPUT_EVENTS the stream fails as
        `protocol`, holding no more gaps."""
        if self.output_events >= MAX_OUTPUT_EVENTS:
            self.fail(ErrorClass.PROTOCOL, f"stream of over {MAX_OUTPUT_EVENTS} output events")
            return
        if self.last_output_ns is not None:
            self.itl_ns.append(now_ns - self.last_output_ns)
        else:
            self.first_output_ns = now_ns
        self.last_output_ns = now_ns
        self.output_events += 1
        if not answer:
            self.reasoning_events += 1
        elif self.first_answer_ns is None:
            self.first_answer_ns = now_ns

    def counted(self, completion: int | None, prompt: int | None, cached: int | None) -> None:
        """Usage the server reported (each figure kept when given, so a later report of part
        of it does not undo an earlier one)."""
        if completion is not None:
            self.completion_tokens = completion
        if prompt is not None:
            self.prompt_tokens = prompt
        if cached is not None:
            self.cached_tokens = cached

    def counted_reasoning(self, reasoning: int | None) -> None:
        """Reasoning tokens the server reported (kept when given, as `counted` does)."""
        if reasoning is not None:
            self.reasoning_counted = reasoning

    @property
    def server_reasoning(self) -> int | None:
        """The server's count of reasoning tokens where it is plausible: no more than its
        count of output tokens (the two may come in different events)."""
        return plausible_reasoning(self.reasoning_counted, self.completion_tokens)

    @property
    def reasoning_tokens(self) -> int | None:
        """The server's count of reasoning tokens (where plausible), else the reasoning
        events counted, at most the output tokens; None when there was no reasoning."""
        counted = self.server_reasoning
        if counted is not None:
            return counted
        return estimated_reasoning(self.reasoning_events, self.output_tokens)

    def _on_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.counted(token_count(usage.get("completion_tokens")),
                         token_count(usage.get("prompt_tokens")), cached_token_count(usage))
            self.counted_reasoning(reasoning_token_count(usage, "completion_tokens_details"))

    def _on_error(self, error: Any) -> None:
        code = error.get("code") if isinstance(error, dict) else None
        status = code if isinstance(code, int) else 500
        self.fail(error_class_for_status(status) or ErrorClass.HTTP_5XX, "error event in stream")

    def fail(self, error_class: ErrorClass, detail: str) -> None:
        self.failure, self.detail = error_class, detail

    @property
    def output_tokens(self) -> int:
        return self.completion_tokens if self.completion_tokens is not None else self.output_events

    @property
    def complete(self) -> bool:
        return self.done or self.finished

    def outcome(self) -> tuple[ErrorClass | None, str | None]:
        """Classify the stream once it has ended (docs/metrics.md#success)."""
        if self.failure is not None:
            return self.failure, self.detail
        if not self.complete:
            return ErrorClass.TRUNCATED, "stream ended before a finish reason or [DONE]"
        if self.output_tokens < 1 or self.output_events == 0:
            return ErrorClass.EMPTY, "no output tokens"
        return None, None


# --- measurements ---------------------------------------------------------------------------


def _ms(delta_ns: int) -> float:
    return delta_ns / NS_PER_MS


def json_object(raw: bytes) -> dict[str, Any] | str:
    """A whole response body as a JSON object, or why it is not one."""
    try:
        payload = orjson.loads(raw)
    except (ValueError, RecursionError):
        return "malformed JSON response"
    return payload if isinstance(payload, dict) else "response is not a JSON object"


WORD_SLICE = 1 << 16
"""Characters split at a time when counting words: a 16 MiB body's words are never all held
as strings at once."""


def word_count(text: str) -> int:
    """Whitespace-separated words of `text`, as len(text.split()) counts them, without making
    a string of each word at once (a 16 MiB answer of two-letter words would hold hundreds of
    MiB on the event loop)."""
    count = 0
    for start in range(0, len(text), WORD_SLICE):
        count += len(text[start:start + WORD_SLICE].split())
        if start and not text[start - 1].isspace() and not text[start].isspace():
            count -= 1  # a word cut by the slice was counted on both sides
    return count


def whole_measurement(t_send_ns: int, end: int, status: int, *, text: str, calls: int,
                      completion: int | None, prompt: int | None, cached: int | None,
                      reply: Reply | None, reasoning: int | None = None,
                      reasoning_text: str = "") -> Measurement:
    """A whole (non-streamed) generation that ended at `end` (ns): its answer text and tool
    calls, its reasoning text, and the usage the server reported. Without a completion
    count, the output is estimated as the words of both texts plus the tool calls (and the
    reasoning tokens as the reasoning text's words); no output at all is `empty`."""
    words = word_count(reasoning_text)
    tokens = completion if completion is not None \
        else word_count(text) + calls + words
    reasoning = plausible_reasoning(reasoning, completion)
    error = None if tokens >= 1 and (text or calls or reasoning_text) else ErrorClass.EMPTY
    return Measurement(
        ttft_ms=None,
        itl_ms=(),
        e2e_ms=_ms(end - t_send_ns),
        output_tokens=tokens,
        tokens_server_counted=completion is not None,
        input_tokens=prompt,
        http_status=status,
        error_class=error,
        error_detail=None if error is None else "no output tokens",
        cached_tokens=cached,
        reply=reply,
        reasoning_tokens=reasoning if reasoning is not None
        else estimated_reasoning(words, tokens),
        reasoning_server_counted=reasoning is not None,
    )


def answered_whole(measurement: Measurement) -> Measurement:
    """The whole answer to a streamed request (`is_whole_answer`), marked not streamed: its
    first token came with its last byte, so a successful one's TTFT is its E2E (and it has
    no ITL); docs/metrics.md#not-streamed."""
    ttft = measurement.e2e_ms if measurement.error_class is None else None
    return replace(measurement, ttft_ms=ttft, ttfo_ms=ttft, streamed=False)


def failure(t_send_ns: int, status: int | None, error: ErrorClass, detail: str) -> Measurement:
    """A request that failed before any output: ends now (and answered nothing to keep)."""
    return from_state(StreamState(), t_send_ns, time.perf_counter_ns(), status, error, detail)


def partial_result(
    state: StreamState, t_send_ns: int, status: int | None, error: ErrorClass, detail: str
) -> Measurement:
    """A stream that failed part way: what arrived so far, ending now."""
    return from_state(state, t_send_ns, time.perf_counter_ns(), status, error, detail)


def from_state(
    state: StreamState,
    t_send_ns: int,
    end_ns: int,
    status: int | None,
    error: ErrorClass | None,
    detail: str | None,
    **extra: Any,
) -> Measurement:
    """The measurement of a stream that ended at `end_ns`: TTFT and ITL from its events;
    `extra`, further Measurement fields (a transport's phases), set in the same making."""
    collected = state.reply
    first_call = None if collected is None else collected.first_tool_call_ns
    return Measurement(
        ttft_ms=None if state.first_output_ns is None else _ms(state.first_output_ns - t_send_ns),
        itl_ms=tuple(map(truediv, state.itl_ns, repeat(NS_PER_MS, len(state.itl_ns)))),
        e2e_ms=_ms(end_ns - t_send_ns),
        output_tokens=state.output_tokens,
        tokens_server_counted=state.completion_tokens is not None,
        input_tokens=state.prompt_tokens,
        http_status=status,
        error_class=error,
        error_detail=detail,
        cached_tokens=state.cached_tokens,
        reply=None if collected is None else collected.reply(),
        tool_call_ms=None if first_call is None else _ms(first_call - t_send_ns),
        ttfo_ms=None if state.first_answer_ns is None else _ms(state.first_answer_ns - t_send_ns),
        reasoning_tokens=state.reasoning_tokens,
        reasoning_server_counted=state.server_reasoning is not None,
        **extra,
    )
