"""Images in a request, as the simulator counts them: every image part of every message, in
each protocol's shape (chat `image_url`, Responses `input_image`, Anthropic `image` blocks),
read from its PNG header only (a data URI's first bytes), costs one token per 28 x 28 patch, as
Qwen2-VL's vision encoder does. An image it cannot read (a URL it would have to fetch, another
format) costs a flat FALLBACK_TOKENS."""

from __future__ import annotations

import base64
import binascii
import math
import struct
from typing import Any

PATCH = 28
FALLBACK_TOKENS = 256
PNG = b"\x89PNG\r\n\x1a\n"


def png_size(data_uri_or_base64: str) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR, reading only its first 33 bytes."""
    data = data_uri_or_base64.partition(",")[2] if data_uri_or_base64.startswith("data:") \
        else data_uri_or_base64
    try:
        head = base64.b64decode(data[:44])
    except (binascii.Error, ValueError):
        return None
    if len(head) < 24 or not head.startswith(PNG) or head[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def _image_of(part: dict[str, Any]) -> str | None:
    """The image data (URI or base64) of one content part, or None when it is no image."""
    kind = part.get("type")
    if kind == "image_url":
        url = part.get("image_url")
        return str(url.get("url", "")) if isinstance(url, dict) else str(url or "")
    if kind == "input_image":
        return str(part.get("image_url") or "")
    if kind == "image":
        source = part.get("source")
        return str(source.get("data") or source.get("url") or "") \
            if isinstance(source, dict) else ""
    return None


def image_tokens(body: dict[str, Any]) -> int:
    """The tokens of every image the request's messages carry."""
    messages = body.get("messages", body.get("input"))
    tokens = 0
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            image = _image_of(part) if isinstance(part, dict) else None
            if image is None:
                continue
            size = png_size(image)
            tokens += FALLBACK_TOKENS if size is None else \
                math.ceil(size[0] / PATCH) * math.ceil(size[1] / PATCH)
    return tokens
