"""A request body in the shape its protocol takes. The request builder writes every
conversation the way OpenAI chat does (`messages`, `max_tokens`, `stream_options`, content
parts `text` and `image_url`); the Responses and Anthropic Messages protocols take the same
conversation under other names, converted here without I/O, before the body is encoded (so
never within a request's time)."""

from __future__ import annotations

from typing import Any

from sustain.probes.client.target import ApiKind

DATA_URI_PREFIX = "data:"


def shaped(body: dict[str, Any], kind: ApiKind) -> dict[str, Any]:
    """`body` (chat-shaped, changed in place and returned) as `kind` takes it."""
    if kind is ApiKind.OPENAI_RESPONSES:
        messages = body.pop("messages", None)
        if messages is not None:
            body["input"] = [responses_message(message) for message in messages]
        if "max_tokens" in body:
            body["max_output_tokens"] = body.pop("max_tokens")
        body.pop("stream_options", None)  # usage always comes with response.completed
    elif kind is ApiKind.ANTHROPIC_MESSAGES:
        messages = body.pop("messages", None) or []
        system = [text_of(m.get("content")) for m in messages if m.get("role") == "system"]
        if system:
            body["system"] = "\n\n".join(system)
        body["messages"] = [anthropic_message(m) for m in messages
                            if m.get("role") != "system"]
        body.pop("stream_options", None)  # usage always comes with message_start/delta
    return body


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
