"""A request body in the shape its protocol takes. The request builder writes every
conversation the way OpenAI chat does (`messages`, `max_tokens`, `stream_options`, content
parts `text` and `image_url`, an assistant's `tool_calls` answered by `tool` messages,
`tools` and `tool_choice`); the Responses and Anthropic Messages protocols take the same
conversation under other names, converted here without I/O (each kind's `shape`:
openai_responses.py, anthropic_messages.py), before the body is encoded (so
never within a request's time):

- Responses: messages are `input` items; an assistant's tool calls are `function_call`
  items and a tool's result a `function_call_output` item, paired by `call_id`; a tool is
  `{"type": "function", "name", "description", "parameters"}`.
- Anthropic: the system prompt is `system`; an assistant's tool calls are `tool_use` blocks
  (their arguments parsed into `input`), and the tool results answering them are
  `tool_result` blocks of the next user message, ahead of its text (consecutive user
  messages are one, as the protocol alternates roles); a tool is `{"name", "description",
  "input_schema"}`.
"""

from __future__ import annotations

import json
from typing import Any

DATA_URI_PREFIX = "data:"


def to_responses(body: dict[str, Any]) -> dict[str, Any]:
    """A chat-shaped `body` (changed in place and returned) as the Responses protocol takes
    it."""
    messages = body.pop("messages", None)
    if messages is not None:
        body["input"] = [item for message in messages for item in responses_items(message)]
    if "max_tokens" in body:
        body["max_output_tokens"] = body.pop("max_tokens")
    body.pop("stream_options", None)  # usage always comes with response.completed
    body.pop("thinking", None)  # Anthropic's spelling
    if "reasoning_effort" in body:
        body["reasoning"] = {"effort": body.pop("reasoning_effort")}
    _convert_tools(body, responses_tool, responses_tool_choice)
    return body


def to_anthropic(body: dict[str, Any]) -> dict[str, Any]:
    """A chat-shaped `body` (changed in place and returned) as the Anthropic Messages
    protocol takes it."""
    messages = body.pop("messages", None) or []
    system = [text_of(m.get("content")) for m in messages
              if m.get("role") in ("system", "developer")]
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = anthropic_messages(
        [m for m in messages if m.get("role") not in ("system", "developer")])
    body.pop("stream_options", None)  # usage always comes with message_start/delta
    body.pop("reasoning_effort", None)  # OpenAI's spelling: Anthropic asks `thinking`
    _convert_tools(body, anthropic_tool, anthropic_tool_choice)
    return body


def _convert_tools(body: dict[str, Any], tool: Any, choice: Any) -> None:
    """The body's chat-shaped `tools` and `tool_choice`, each converted by its function."""
    if isinstance(body.get("tools"), list):
        body["tools"] = [tool(t) for t in body["tools"]]
    if "tool_choice" in body:
        body["tool_choice"] = choice(body["tool_choice"])


def chat_function(tool: Any) -> dict[str, Any] | None:
    """A chat tool's function (`{"type": "function", "function": {...}}`), or None for a
    tool of another shape (passed as it is)."""
    if isinstance(tool, dict) and tool.get("type") == "function" and \
            isinstance(tool.get("function"), dict):
        return dict(tool["function"])
    return None


def responses_tool(tool: Any) -> Any:
    function = chat_function(tool)
    return tool if function is None else {"type": "function", **function}


def responses_tool_choice(choice: Any) -> Any:
    """`auto`, `none` and `required` are the same; a named function is flat."""
    function = chat_function(choice)
    return choice if function is None else {"type": "function", "name": function.get("name")}


def anthropic_tool(tool: Any) -> Any:
    function = chat_function(tool)
    if function is None:
        return tool
    out = {"name": function.get("name"),
           "input_schema": function.get("parameters") or {"type": "object"}}
    if function.get("description"):
        out["description"] = function["description"]
    return out


def anthropic_tool_choice(choice: Any) -> Any:
    """`auto`, `none`, `required` (Anthropic's `any`) or a named function (`tool`)."""
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    function = chat_function(choice)
    return choice if function is None else {"type": "tool", "name": function.get("name")}


def tool_calls_of(message: dict[str, Any]) -> list[tuple[str, str, str]]:
    """An assistant message's tool calls as (id, function name, arguments text)."""
    calls = message.get("tool_calls")
    found = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            found.append((str(call.get("id", "")), str(function.get("name", "")),
                          str(function.get("arguments", ""))))
    return found


def responses_items(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A chat message as Responses input items: a message, and an assistant's tool calls
    as `function_call` items after its text; a tool message is a `function_call_output`."""
    role = message.get("role")
    if role == "tool":
        return [{"type": "function_call_output", "call_id": message.get("tool_call_id"),
                 "output": text_of(message.get("content"))}]
    calls = tool_calls_of(message) if role == "assistant" else []
    if not calls:
        return [responses_message(message)]
    items = [responses_message({"role": "assistant", "content": message["content"]})] \
        if message.get("content") else []
    items += [{"type": "function_call", "call_id": call_id, "name": name,
               "arguments": arguments} for call_id, name, arguments in calls]
    return items


def anthropic_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages (no system prompt) as Anthropic's: tool calls as `tool_use` blocks,
    tool results as `tool_result` blocks leading the user message that follows them."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            converted = {"role": "user", "content": [{
                "type": "tool_result", "tool_use_id": message.get("tool_call_id"),
                "content": text_of(message.get("content"))}]}
        else:
            converted = anthropic_message(message)
            calls = tool_calls_of(message) if role == "assistant" else []
            if calls:
                blocks = blocks_of(converted["content"])
                blocks += [{"type": "tool_use", "id": call_id, "name": name,
                            "input": arguments_object(arguments)}
                           for call_id, name, arguments in calls]
                converted["content"] = blocks
        if out and out[-1]["role"] == "user" == converted["role"]:
            out[-1]["content"] = blocks_of(out[-1]["content"]) + \
                blocks_of(converted["content"])
        else:
            out.append(converted)
    return out


def blocks_of(content: Any) -> list[dict[str, Any]]:
    """Anthropic content as a list of blocks (a string is one text block; empty, none)."""
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": content}] if content else []


def arguments_object(arguments: str) -> dict[str, Any]:
    """A tool call's arguments as the object `tool_use.input` takes: the JSON the model
    wrote, or `{}` when it wrote no JSON object (a truncated call)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def text_of(content: Any) -> str:
    """A message's text: its content string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part["text"] for part in content
                        if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def responses_message(message: dict[str, Any]) -> dict[str, Any]:
    """A chat message as a Responses input message: text parts are `input_text`, images
    `input_image` with their URL (a data URI stays one)."""
    content = message.get("content")
    if not isinstance(content, list):
        return dict(message)
    parts: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            parts.append({"type": "input_text", "text": part.get("text", "")})
        elif part.get("type") == "image_url":
            parts.append({"type": "input_image", "image_url": image_url(part)})
        else:
            parts.append(part)
    return {**message, "content": parts}


def anthropic_message(message: dict[str, Any]) -> dict[str, Any]:
    """A chat message as an Anthropic one: text parts stay `text`, an image becomes an
    `image` block, its source base64 data (a data URI) or a URL."""
    content = message.get("content")
    if not isinstance(content, list):
        return {"role": message.get("role"), "content": content if content is not None
                else ""}
    blocks: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "image_url":
            blocks.append({"type": "image", "source": image_source(image_url(part))})
        else:
            blocks.append(part)
    return {"role": message.get("role"), "content": blocks}


def image_url(part: dict[str, Any]) -> str:
    url = part.get("image_url")
    if isinstance(url, dict):
        url = url.get("url")
    return url if isinstance(url, str) else ""


def image_source(url: str) -> dict[str, str]:
    """An Anthropic image source: `base64` with its media type for a data URI
    (`data:image/png;base64,...`), else `url`."""
    if url.startswith(DATA_URI_PREFIX):
        head, _, data = url[len(DATA_URI_PREFIX):].partition(",")
        return {"type": "base64", "media_type": head.split(";")[0] or "image/png",
                "data": data}
    return {"type": "url", "url": url}
