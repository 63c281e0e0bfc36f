"""What an endpoint answered, kept only for the requests that need it: a multi-turn session
appends the assistant's actual reply to the conversation's history, and a quality canary
scores it. Every other request keeps no response text (it costs memory and time on the loop
that times requests)."""

from __future__ import annotations

from dataclasses import dataclass

MAX_REPLY_CHARS = 262_144
"""Characters of reply text kept; past them the reply is kept truncated (and says so)."""
MAX_TOOL_CALLS = 64
"""Tool calls kept of one reply."""
MAX_ARGUMENT_CHARS = 65_536
"""Characters of one tool call's arguments kept."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the model asked for: its id, the function's name, and its arguments
    as the JSON text the model generated (not necessarily valid JSON)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Reply:
    """The assistant's answer: its text (message content or completion text; reasoning is
    not kept, as a conversation's history does not send it back) and its tool calls."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    truncated: bool = False
    """More arrived than is kept (MAX_REPLY_CHARS, MAX_TOOL_CALLS, MAX_ARGUMENT_CHARS)."""

    def message(self) -> dict[str, object]:
        """The reply as the assistant message a conversation's next turn sends back."""
        message: dict[str, object] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": call.id, "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}
                for call in self.tool_calls]
        elif not self.text:
            message["content"] = ""
        return message
