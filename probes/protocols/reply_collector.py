"""What a request that keeps its reply (a session's turn, a quality canary) keeps of it: the
text and tool calls of its choices, gathered event by event or from a whole answer, within the
bounds of measure/reply.py. The protocols' stream states (streaming.py and the kinds' readers)
feed it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from sustain.probes.measure.reply import (
    MAX_ARGUMENT_CHARS,
    MAX_REPLY_CHARS,
    MAX_TOOL_CALLS,
    Reply,
    ToolCall,
)


@dataclass(slots=True)
class ReplyCollector:
    """Gathers a reply's text and tool calls from its choices, for the requests that keep
    their reply (a session's turn, a quality canary), within the bounds of measure/reply.py.
    Streamed tool calls arrive in pieces: the first names the call (`id`,
    `function.name`), the rest append to its `arguments`; pieces belong to the call at their
    `index` (or, without one, to the last call)."""

    parts: list[str] = field(default_factory=list)
    size: int = 0
    calls: list[list[str]] = field(default_factory=list)
    """[id, name, arguments] of each tool call, in index order."""
    first_tool_call_ns: int | None = None
    truncated: bool = False

    def add_text(self, text: object) -> None:
        if not isinstance(text, str) or not text:
            return
        room = MAX_REPLY_CHARS - self.size
        if len(text) > room:
            text, self.truncated = text[:room], True
        if text:
            self.parts.append(text)
            self.size += len(text)

    def add_tool_call(self, piece: object, now_ns: int | None) -> None:
        if not isinstance(piece, dict):
            return
        if self.first_tool_call_ns is None and now_ns is not None:
            self.first_tool_call_ns = now_ns
        index = piece.get("index")
        if not (isinstance(index, int) and not isinstance(index, bool) and index >= 0):
            index = max(len(self.calls) - 1, 0) if "id" not in piece else len(self.calls)
        if index >= MAX_TOOL_CALLS:
            self.truncated = True
            return
        while len(self.calls) <= index:
            self.calls.append(["", "", ""])
        call = self.calls[index]
        if isinstance(piece.get("id"), str) and not call[0]:
            call[0] = piece["id"][:256]
        function = piece.get("function")
        if isinstance(function, dict):
            if isinstance(function.get("name"), str) and not call[1]:
                call[1] = function["name"][:256]
            arguments = function.get("arguments")
            if isinstance(arguments, dict):  # some servers send an object, not JSON text
                arguments = orjson.dumps(arguments).decode()
            if isinstance(arguments, str) and arguments:
                room = MAX_ARGUMENT_CHARS - len(call[2])
                if len(arguments) > room:
                    arguments, self.truncated = arguments[:room], True
                call[2] += arguments

    def on_choice(self, choice: Any, now_ns: int) -> None:
        """One streamed choice: chat `delta.content` and `delta.tool_calls`, or completion
        `text`."""
        if type(choice) is not dict:
            return
        delta = choice.get("delta")
        if type(delta) is dict:
            self.add_text(delta.get("content"))
            pieces = delta.get("tool_calls")
            if isinstance(pieces, list):
                for piece in pieces:
                    self.add_tool_call(piece, now_ns)
        self.add_text(choice.get("text"))

    def on_whole(self, payload: dict[str, Any]) -> None:
        """A non-streamed response's first choice: its message (or text)."""
        choices = payload.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, dict):
            return
        message = choice.get("message")
        if isinstance(message, dict):
            self.add_text(message.get("content"))
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                for index, call in enumerate(calls):
                    if isinstance(call, dict):
                        self.add_tool_call({**call, "index": index}, None)
        self.add_text(choice.get("text"))

    def reply(self) -> Reply:
        calls = tuple(ToolCall(id=call[0] or f"call_{index}", name=call[1],
                               arguments=call[2])
                      for index, call in enumerate(self.calls))
        return Reply(text="".join(self.parts), tool_calls=calls, truncated=self.truncated)
