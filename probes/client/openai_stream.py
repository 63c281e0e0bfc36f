"""Reading OpenAI-compatible responses: which events carry output, when a stream is complete."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sustain.probes.client.sse import SSEEvent
from sustain.probes.measure.sample import ErrorClass

NS_PER_MS = 1_000_000
MAX_TOKEN_COUNT = 2**31 - 1


def token_count(value: Any) -> int | None:
    """A usage figure as reported by the server, or None when absent or implausible."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_TOKEN_COUNT else None


OUTPUT_KEYS = ("content", "reasoning_content", "reasoning", "tool_calls")


def choice_has_output(choice: Any) -> bool:
    """Content, reasoning or tool-call deltas (chat), text (completions); role-only is not."""
    if type(choice) is not dict:
        return False
    delta = choice.get("delta")
    if type(delta) is dict:
        for key in OUTPUT_KEYS:
            value = delta.get(key)
            if value and isinstance(value, (str, list)):
                return True
    text = choice.get("text")
    return bool(text) and isinstance(text, str)


def error_class_for_status(status: int) -> ErrorClass | None:
    if status == 429:
        return ErrorClass.HTTP_429
    if 400 <= status < 500:
        return ErrorClass.HTTP_4XX
    if status >= 500:
        return ErrorClass.HTTP_5XX
    return None


@dataclass(slots=True)
class StreamState:
    """Accumulates a streamed response's events; timestamps in ns from the monotonic clock."""

    first_output_ns: int | None = None
    last_output_ns: int | None = None
    itl_ns: list[int] = field(default_factory=list)
    output_events: int = 0
    finished: bool = False
    done: bool = False
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    failure: ErrorClass | None = None
    detail: str | None = None

    def on_event(self, event: SSEEvent, now_ns: int) -> None:
        if self.failure is not None or self.done:
            return
        if event.data == "[DONE]":
            self.done = True
            return
        try:
            payload = json.loads(event.data)
        except (ValueError, RecursionError):
            self._fail(ErrorClass.PROTOCOL, "malformed JSON in SSE data")
            return
        if not isinstance(payload, dict):
            self._fail(ErrorClass.PROTOCOL, "SSE data is not a JSON object")
            return
        if payload.get("error") is not None:
            self._on_error(payload["error"])
            return
        usage = payload.get("usage")
        if usage:
            self._on_usage(usage)
        choices = payload.get("choices")
        if not choices:
            return
        if type(choices) is not list:
            self._fail(ErrorClass.PROTOCOL, "choices is not a list")
            return
        output = finished = False
        for choice in choices:
            if not output and choice_has_output(choice):
                output = True
            if type(choice) is dict and choice.get("finish_reason"):
                finished = True
        if output:
            if self.last_output_ns is not None:
                self.itl_ns.append(now_ns - self.last_output_ns)
            else:
                self.first_output_ns = now_ns
            self.last_output_ns = now_ns
            self.output_events += 1
        if finished:
            self.finished = True

    def _on_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            completion = token_count(usage.get("completion_tokens"))
            prompt = token_count(usage.get("prompt_tokens"))
            if completion is not None:
                self.completion_tokens = completion
            if prompt is not None:
                self.prompt_tokens = prompt

    def _on_error(self, error: Any) -> None:
        code = error.get("code") if isinstance(error, dict) else None
        status = code if isinstance(code, int) else 500
        self._fail(error_class_for_status(status) or ErrorClass.HTTP_5XX, "error event in stream")

    def _fail(self, error_class: ErrorClass, detail: str) -> None:
        self.failure, self.detail = error_class, detail

    @property
    def output_tokens(self) -> int:
        return self.completion_tokens if self.completion_tokens is not None else self.output_events

    @property
    def complete(self) -> bool:
        return self.done or self.finished

    def outcome(self) -> tuple[ErrorClass | None, str | None]:
        """Classify the stream once it has ended (SPEC section 4, 'Success')."""
        if self.failure is not None:
            return self.failure, self.detail
        if not self.complete:
            return ErrorClass.TRUNCATED, "stream ended before a finish reason or [DONE]"
        if self.output_tokens < 1 or self.output_events == 0:
            return ErrorClass.EMPTY, "no output tokens"
        return None, None


def message_text(payload: dict[str, Any]) -> str:
    """The generated text of a non-streamed chat or completions response."""
    parts: list[str] = []
    for choice in payload.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        if isinstance(message, dict):
            for key in ("content", "reasoning_content", "reasoning"):
                if isinstance(message.get(key), str):
                    parts.append(message[key])
        if isinstance(choice.get("text"), str):
            parts.append(choice["text"])
    return "".join(parts)
