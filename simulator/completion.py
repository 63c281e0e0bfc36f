"""What the simulator answers, as data (no I/O): OpenAI completion and chat bodies, their
server-sent events, simulated tool calls, the checks of a request's message history, and a
stream as a plan of bytes and deadlines that the app (app.py) writes out. The other protocols'
events (responses.py, messages.py) wrap the same Completion, so every protocol streams the
same tokens at the same times and takes the same faults."""

from __future__ import annotations

import dataclasses
import json
import math
import time
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from sustain.simulator.config import Fault, SimulatorConfig


def sse(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def named(payload: dict[str, Any]) -> bytes:
    """One event named for its `type` (`event: <type>`), as the Responses and Anthropic
    Messages protocols send them."""
    return f"event: {payload['type']}\n".encode() + sse(payload)


@dataclasses.dataclass(frozen=True, slots=True)
class ToolCall:
    """A simulated function call: its arguments stream one piece per token."""

    id: str
    name: str
    pieces: tuple[str, ...]


def tool_function(tool: Any) -> dict[str, Any] | None:
    """A tool's function: chat nests it (`{"type": "function", "function": {...}}`), the
    Responses and Anthropic protocols give it flat (`{"name": ..., "parameters"` or
    `"input_schema": ...}`)."""
    if not isinstance(tool, dict):
        return None
    function = tool.get("function")
    if isinstance(function, dict):
        return function
    return tool if isinstance(tool.get("name"), str) else None


def tool_call(tools: list[Any], tokens: int) -> ToolCall | None:
    """A call to the first function of `tools`, its arguments filling the function's
    required string properties (or `{}`), in at most `tokens` pieces."""
    function = next((f for f in map(tool_function, tools) if f is not None), None)
    if function is None or not isinstance(function.get("name"), str):
        return None
    parameters = function.get("parameters") or function.get("input_schema")
    required = parameters.get("required") if isinstance(parameters, dict) else None
    names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
    arguments = json.dumps({name: f"value of {name}" for name in names})
    count = max(1, min(tokens, len(arguments)))
    size = -(-len(arguments) // count)
    pieces = tuple(arguments[i:i + size] for i in range(0, len(arguments), size))
    return ToolCall("call_" + uuid.uuid4().hex[:12], function["name"], pieces)


class Completion:
    """One simulated generation, chat or text completion, shaped like vLLM's responses."""

    def __init__(self, chat: bool, model: str, tokens: int, prompt_tokens: int,
                 cached_tokens: int | None = None, tool: ToolCall | None = None,
                 reasoning: int = 0) -> None:
        self.chat = chat
        self.model = model
        self.tool = tool
        self.answer_tokens = len(tool.pieces) if tool is not None and tokens else tokens
        self.reasoning = reasoning if self.answer_tokens else 0
        """Reasoning tokens streamed before the answer (the chat-shaped protocols': chat,
        responses, messages): token k below it is a reasoning delta, the rest the answer's."""
        self.tokens = self.reasoning + self.answer_tokens
        self.prompt_tokens = prompt_tokens
        self.cached_tokens = cached_tokens
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:16]
        self.created = int(time.time())

    @staticmethod
    def token(k: int) -> str:
        return f"tok{k} "

    @staticmethod
    def thought(k: int) -> str:
        return f"think{k} "

    def text(self) -> str:
        """The answer's tokens' text, concatenated."""
        return "".join(self.token(k) for k in range(self.answer_tokens))

    def reasoning_text(self) -> str:
        """The reasoning tokens' text, concatenated."""
        return "".join(self.thought(k) for k in range(self.reasoning))

    def output(self, k: int) -> dict[str, Any]:
        """Token `k` as a chunk: a reasoning word first (`reasoning_content`, as vLLM's
        reasoning parsers send it), then an answer word or the next piece of the tool call's
        arguments (the first piece names the call)."""
        if k < self.reasoning:
            return self.chunk({"delta": {"reasoning_content": self.thought(k)},
                               "finish_reason": None})
        k -= self.reasoning
        if self.tool is None:
            return self.delta(self.token(k), None)
        piece: dict[str, Any] = {"index": 0, "function": {"arguments": self.tool.pieces[k]}}
        if k == 0:
            piece.update(id=self.tool.id, type="function")
            piece["function"]["name"] = self.tool.name
        return self.chunk({"delta": {"tool_calls": [piece]}, "finish_reason": None})

    def chunk(self, choice: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [] if choice is None else [{"index": 0, "logprobs": None, **choice}],
        }

    def delta(self, text: str | None, finish: str | None) -> dict[str, Any]:
        if self.chat:
            delta = {} if text is None else {"content": text}
            return self.chunk({"delta": delta, "finish_reason": finish})
        return self.chunk({"text": text or "", "finish_reason": finish})

    def usage(self) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.tokens,
            "total_tokens": self.prompt_tokens + self.tokens,
        }
        if self.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        if self.reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning}
        return usage

    # The stream's events (see StreamEvents), as vLLM sends them.

    @property
    def completion(self) -> Completion:
        return self

    def opening(self, zero: bool) -> list[bytes]:
        """Sent at once: a chat stream's role chunk (none when no content follows)."""
        if not self.chat or zero:
            return []
        return [sse(self.chunk({"delta": {"role": "assistant", "content": ""},
                                "finish_reason": None}))]

    def token_event(self, k: int) -> bytes:
        return sse(self.output(k))

    def text_event(self, text: str) -> bytes:
        return sse(self.delta(text, None))

    def error_event(self) -> bytes:
        return sse({"error": {"message": "injected engine error", "code": 500}})

    def closing(self, finish: str, include_usage: bool) -> list[bytes]:
        closing = [sse(self.delta(None if self.chat else "", finish))]
        if include_usage:
            closing.append(self.usage_event())
        return [*closing, sse("[DONE]")]

    def usage_event(self) -> bytes:
        return sse({**self.chunk(None), "usage": self.usage()})

    def usage_only(self) -> list[bytes]:
        return [self.usage_event(), sse("[DONE]")]

    def whole(self, finish: str) -> dict[str, Any]:
        text = self.text()
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
        if self.chat and self.tool is not None and self.tokens:
            choice["message"] = {"role": "assistant", "content": None, "tool_calls": [{
                "id": self.tool.id, "type": "function", "function": {
                    "name": self.tool.name, "arguments": "".join(self.tool.pieces)}}]}
        elif self.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        if self.reasoning:
            choice["message"]["reasoning_content"] = self.reasoning_text()
        return {
            "id": self.id,
            "object": "chat.completion" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage(),
        }


def message_text(message: dict[str, Any]) -> str:
    """A message's text as a server's template renders it: its content (a string, or text
    parts and blocks) and any tool call's name and arguments, or tool result: chat's
    `tool_calls`, Responses' `function_call` and `function_call_output` items, Anthropic's
    `tool_use` and `tool_result` blocks."""
    content = message.get("content")
    parts: list[str] = []
    for part in [content] if isinstance(content, str) else \
            content if isinstance(content, list) else []:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict):
            if isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif part.get("type") == "tool_use":
                parts += [str(part.get("name", "")), json.dumps(part.get("input", {}))]
            elif part.get("type") == "tool_result":
                parts.append(message_text({"content": part.get("content")}))
    if message.get("type") == "function_call":
        parts += [str(message.get("name", "")), str(message.get("arguments", ""))]
    elif message.get("type") == "function_call_output":
        parts.append(str(message.get("output", "")))
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            parts += [str(function.get("name", "")), str(function.get("arguments", ""))]
    return " ".join(parts)


def prompt_words(body: dict[str, Any]) -> list[str]:
    """The prompt's tokens: one per whitespace-separated word, over every message (the whole
    history of a multi-turn request): chat and Anthropic `messages` (and Anthropic's
    `system`), Responses `input` (text or messages), a completion's `prompt`."""
    messages = body.get("messages", body.get("input"))
    if isinstance(messages, list):
        system = body.get("system")
        text = " ".join([message_text({"content": system}) if system else "",
                         *(message_text(m) for m in messages if isinstance(m, dict))])
    elif isinstance(messages, str):
        text = messages
    else:
        text = str(body.get("prompt", ""))
    return text.split()


def prompt_token_count(words: Sequence[str], chars_per_token: float | None) -> int:
    """The tokens of a prompt's `words`: one each, or, with `chars_per_token`, each word's
    length over it rounded up (as a subword tokenizer splits a longer word in more pieces)."""
    if chars_per_token is None:
        return len(words)
    return sum(max(1, math.ceil(len(word) / chars_per_token)) for word in words)


def history_problem(messages: Any) -> str | None:
    """Why a chat history is not one a server accepts, or None: an assistant's tool calls
    must be answered, each by one tool message, before anything else is said (as OpenAI
    and vLLM's stricter templates require), and every tool result must answer such a call."""
    if not isinstance(messages, list):
        return "messages must be a list"
    pending: set[str] = set()
    for message in messages:
        if not isinstance(message, dict):
            return "each message must be an object"
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return (f"tool message answers no pending tool call "
                        f"({message.get('tool_call_id')!r})")
            pending.discard(message["tool_call_id"])
            continue
        if pending:
            return f"tool calls {sorted(pending)} were not answered"
        if role == "assistant":
            pending = {call["id"] for call in message.get("tool_calls") or []
                       if isinstance(call, dict) and isinstance(call.get("id"), str)}
    if pending:
        return f"tool calls {sorted(pending)} were not answered"
    return None


def responses_history_problem(items: Any) -> str | None:
    """Why a Responses `input` is not one a server accepts, or None: each `function_call`
    answered by one `function_call_output` of its `call_id` before anything else is said,
    and every output answering such a call."""
    if isinstance(items, str):
        return None
    if not isinstance(items, list):
        return "input must be a string or a list"
    pending: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            return "each input item must be an object"
        kind = item.get("type")
        if kind == "function_call":
            pending.add(str(item.get("call_id")))
        elif kind == "function_call_output":
            if item.get("call_id") not in pending:
                return f"function_call_output answers no pending call ({item.get('call_id')!r})"
            pending.discard(item["call_id"])
        elif pending:
            return f"function calls {sorted(pending)} were not answered"
    if pending:
        return f"function calls {sorted(pending)} were not answered"
    return None


def anthropic_history_problem(messages: Any) -> str | None:
    """Why Anthropic `messages` are not ones the API accepts, or None: roles alternate from
    a user message, and each assistant `tool_use` is answered by a `tool_result` of its id
    leading the next user message, every result answering such a use."""
    if not isinstance(messages, list):
        return "messages must be a list"
    expected, pending = "user", set[str]()
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != expected:
            return f"messages must alternate user and assistant, from user (wanted {expected})"
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if expected == "user":
            results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            if results != [b.get("tool_use_id") for b in blocks[:len(results)]]:
                return "tool_result blocks must come first in a user message"
            if set(results) != pending or len(results) != len(pending):
                return f"tool uses {sorted(pending)} answered by {sorted(map(str, results))}"
            pending, expected = set(), "assistant"
        else:
            pending = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
            expected = "user"
    if pending:
        return f"tool uses {sorted(pending)} were not answered"
    return None


HISTORY_PROBLEM = {"chat": history_problem, "responses": responses_history_problem,
                   "messages": anthropic_history_problem}
"""Each conversation protocol's check of a request's history."""


def wants_tool(body: dict[str, Any]) -> bool:
    """Whether the model 'decides' to call a tool: tools were offered, tool_choice allows,
    and the last message is not already a tool's result (then it answers in text)."""
    tools, messages = body.get("tools"), body.get("messages", body.get("input"))
    if not (isinstance(tools, list) and tools and isinstance(messages, list) and messages):
        return False
    return body.get("tool_choice") not in ("none", {"type": "none"}) and \
        not is_tool_result(messages[-1])


def is_tool_result(message: Any) -> bool:
    """A chat `tool` message, a Responses `function_call_output`, or an Anthropic user
    message leading with a `tool_result`."""
    if not isinstance(message, dict):
        return False
    content = message.get("content")
    return message.get("role") == "tool" or message.get("type") == "function_call_output" \
        or (isinstance(content, list) and bool(content) and isinstance(content[0], dict)
            and content[0].get("type") == "tool_result")


class StreamEvents(Protocol):
    """A protocol's events for one Completion; every protocol streams its tokens at the same
    times and takes the same faults (stream_plan)."""

    @property
    def tokens(self) -> int:
        """Output tokens (text words or tool-call argument pieces)."""

    @property
    def completion(self) -> Completion:
        """What is generated, whatever the protocol."""

    def opening(self, zero: bool) -> list[bytes]:
        """Events sent at once, before the first token (`zero`: no content will follow)."""

    def token_event(self, k: int) -> bytes:
        """Token `k`: a word of text, or the next piece of a tool call's arguments."""

    def text_event(self, text: str) -> bytes:
        """One text delta of any length."""

    def error_event(self) -> bytes:
        """An engine error in the middle of the stream."""

    def closing(self, finish: str, include_usage: bool) -> list[bytes]:
        """The events that end the stream, with usage when asked (or always, where the
        protocol always sends it)."""

    def usage_only(self) -> list[bytes]:
        """A stream with usage and no output at all."""

    def whole(self, finish: str) -> dict[str, Any]:
        """The non-streamed body."""


def stream_plan(events: StreamEvents, config: SimulatorConfig, token_times: list[float],
                fault: Fault, finish: str, include_usage: bool) -> list[bytes | float]:
    """The stream as a plan: bytes to send, and floats that are deadlines to wait for. The
    bytes due by a deadline already past join the write of those before them."""
    if fault is Fault.USAGE_ONLY:
        return [token_times[0], *events.usage_only()]
    plan: list[bytes | float] = []
    if fault in (Fault.ONE_WRITE, Fault.INSTANT):  # the opening waits for the rest
        plan.append(token_times[0])
    plan += events.opening(fault is Fault.ZERO_TOKENS)
    if fault is Fault.INSTANT:
        plan.append(events.text_event("".join(Completion.token(k)
                                              for k in range(events.tokens))))
    middle = events.tokens // 2
    for k in range(0 if fault is Fault.INSTANT else events.tokens):
        plan.append(token_times[k])
        if fault is Fault.TRUNCATE and k >= middle:
            return plan
        if fault is Fault.MALFORMED and k == middle:
            plan.append(b'data: {"choices": [\n\n')
        elif fault is Fault.ERROR_EVENT and k == middle:
            plan.append(events.error_event())
            return plan
        elif fault is Fault.HUGE_CHUNK and k == middle:
            plan.append(events.text_event("x" * config.huge_chunk_bytes))
        else:
            plan.append(events.token_event(k))
    if fault is Fault.TRUNCATE:
        return plan
    if not events.tokens:
        plan.append(token_times[0])
    plan += events.closing(finish, include_usage or fault is Fault.ZERO_TOKENS)
    return plan
