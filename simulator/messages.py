"""The simulator's Anthropic Messages answers (`POST /v1/messages`), as data: a Completion's
tokens as Messages events (`message_start`, `content_block_start`, `ping`,
`content_block_delta` ..., `content_block_stop`, `message_delta`, `message_stop`), and the
whole message. Input served from the prefix cache is reported apart, as Anthropic does
(`cache_read_input_tokens` beside the uncached `input_tokens`)."""

from __future__ import annotations

import json
from typing import Any

from sustain.simulator.completion import Completion, named

STOP_REASONS = {"length": "max_tokens", "tool_calls": "tool_use", "stop": "end_turn"}
"""A chat finish reason -> Anthropic's stop_reason."""


class MessagesEvents:
    """A Completion's stream and body in the Messages protocol (StreamEvents)."""

    def __init__(self, completion: Completion) -> None:
        self.completion = completion
        self.tokens = completion.tokens
        self.id = "msg_" + completion.id.rpartition("-")[2]

    def input_usage(self) -> dict[str, int]:
        c = self.completion
        cached = c.cached_tokens or 0
        return {"input_tokens": c.prompt_tokens - cached, "cache_read_input_tokens": cached,
                "cache_creation_input_tokens": 0}

    def message(self, content: list[dict[str, Any]], stop: str | None,
                output_tokens: int) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant",
                "model": self.completion.model, "content": content, "stop_reason": stop,
                "stop_sequence": None,
                "usage": {**self.input_usage(), "output_tokens": output_tokens}}

    def block(self, done: bool) -> dict[str, Any]:
        c = self.completion
        if c.tool is not None:
            return {"type": "tool_use", "id": "toolu_" + c.tool.id.rpartition("_")[2],
                    "name": c.tool.name,
                    "input": json.loads("".join(c.tool.pieces)) if done else {}}
        return {"type": "text", "text": c.text() if done else ""}

    def opening(self, zero: bool) -> list[bytes]:
        events = [named({"type": "message_start", "message": self.message([], None, 1)})]
        if not zero:
            events.append(named({"type": "content_block_start", "index": 0,
                                 "content_block": self.block(done=False)}))
        return [*events, named({"type": "ping"})]

    def token_event(self, k: int) -> bytes:
        c = self.completion
        if k < c.reasoning:
            return named({"type": "content_block_delta", "index": 0, "delta": {
                "type": "thinking_delta", "thinking": Completion.thought(k)}})
        k -= c.reasoning
        tool = c.tool
        if tool is not None:
            return named({"type": "content_block_delta", "index": 0, "delta": {
                "type": "input_json_delta", "partial_json": tool.pieces[k]}})
        return self.text_event(Completion.token(k))

    def text_event(self, text: str) -> bytes:
        return named({"type": "content_block_delta", "index": 0,
                      "delta": {"type": "text_delta", "text": text}})

    def error_event(self) -> bytes:
        return named({"type": "error", "error": {"type": "overloaded_error",
                                                 "message": "injected engine error"}})

    def closing(self, finish: str, include_usage: bool) -> list[bytes]:  # noqa: ARG002
        """The output usage always comes with message_delta."""
        events = [named({"type": "content_block_stop", "index": 0})] if self.tokens else []
        return [*events,
                named({"type": "message_delta",
                       "delta": {"stop_reason": STOP_REASONS.get(finish, "end_turn"),
                                 "stop_sequence": None},
                       "usage": {"output_tokens": self.tokens}}),
                named({"type": "message_stop"})]

    def usage_only(self) -> list[bytes]:
        return [named({"type": "message_start", "message": self.message([], None, 1)}),
                named({"type": "message_delta",
                       "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                       "usage": {"output_tokens": self.tokens}}),
                named({"type": "message_stop"})]

    def whole(self, finish: str) -> dict[str, Any]:
        content = [self.block(done=True)] if self.tokens else []
        if self.completion.reasoning:
            content.insert(0, {"type": "thinking", "thinking": self.completion.reasoning_text(),
                               "signature": ""})
        return self.message(content, STOP_REASONS.get(finish, "end_turn"), self.tokens)
