"""The simulator's OpenAI image generation answers (`POST /v1/images/generations`), as data: the
request read (`prompt`, `n` of 1 to 10, `size`, `response_format` b64_json or url, `stream`
and `partial_images` of 0 to 3), each image image_bytes of a fixed PNG-headed payload (made
once per size: the client counts images, it never decodes them), and the answer: whole
(`{"created", "data": [...], "usage"}`), or streamed as `image_generation.partial_image`
events, then `image_generation.completed` with the usage, for each image in turn. The app
(app.py) sends them on their schedule and logs when it wrote the first image event."""

from __future__ import annotations

import base64
import functools
import json
import time
from dataclasses import dataclass
from typing import Any

MAX_IMAGES = 10
MAX_PARTIAL_IMAGES = 3
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TOKENS_PER_IMAGE = 272
"""Output tokens of one image in the usage (a low-quality square image's, as gpt-image-1
counts it)."""


@dataclass(frozen=True, slots=True)
class ImagesRequest:
    prompt: str
    count: int
    size: str
    url: bool
    stream: bool
    partial_images: int


def read_images(body: dict[str, Any]) -> ImagesRequest | str:
    """The request, or why it is refused (a 400)."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        return "prompt: required"
    count = body.get("n", 1)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_IMAGES:
        return f"n: must be an integer from 1 to {MAX_IMAGES}"
    size = body.get("size", "1024x1024")
    if not isinstance(size, str):
        return "size: must be WIDTHxHEIGHT or auto"
    response_format = body.get("response_format", "b64_json")
    if response_format not in ("b64_json", "url"):
        return "response_format: must be b64_json or url"
    partial = body.get("partial_images", 0)
    if isinstance(partial, bool) or not isinstance(partial, int) or \
            not 0 <= partial <= MAX_PARTIAL_IMAGES:
        return f"partial_images: must be an integer from 0 to {MAX_PARTIAL_IMAGES}"
    return ImagesRequest(prompt, count, size, response_format == "url",
                         body.get("stream") is True, partial)


@functools.lru_cache(maxsize=4)
def image_b64(size: int) -> str:
    """An image's base64: `size` bytes behind a PNG signature (made once per size)."""
    return base64.b64encode((PNG_SIGNATURE + bytes(max(size - len(PNG_SIGNATURE), 0)))[:size]
                            ).decode()


def usage(request: ImagesRequest, images: int) -> dict[str, Any]:
    prompt = len(request.prompt.split())
    output = TOKENS_PER_IMAGE * images
    return {"input_tokens": prompt, "output_tokens": output,
            "total_tokens": prompt + output,
            "input_tokens_details": {"text_tokens": prompt, "image_tokens": 0}}


def image_item(request: ImagesRequest, index: int, image_bytes: int) -> dict[str, Any]:
    if request.url:
        return {"url": f"https://images.sim.invalid/{time.time_ns():x}-{index}.png"}
    return {"b64_json": image_b64(image_bytes)}


def whole_answer(request: ImagesRequest, image_bytes: int, images: int) -> dict[str, Any]:
    """The whole answer of `images` images (none, under the `empty` fault)."""
    return {"created": int(time.time()), "size": request.size,
            "data": [image_item(request, k, image_bytes) for k in range(images)],
            "usage": usage(request, images)}


def partial_event(index: int, partial: int, image_bytes: int) -> bytes:
    """Partial image `partial` of image `index`: named, so a client may count it unread."""
    return sse("image_generation.partial_image", {
        "type": "image_generation.partial_image", "b64_json": image_b64(image_bytes),
        "partial_image_index": partial, "image_index": index,
        "created_at": int(time.time())})


def completed_event(request: ImagesRequest, index: int, image_bytes: int) -> bytes:
    return sse("image_generation.completed", {
        "type": "image_generation.completed", "b64_json": image_b64(image_bytes),
        "image_index": index, "size": request.size, "created_at": int(time.time()),
        "usage": usage(request, 1)})


def error_event() -> bytes:
    return sse("error", {"type": "error", "error": {"code": "server_error",
                                                     "message": "injected engine error"}})


def sse(name: str, payload: dict[str, Any]) -> bytes:
    data = json.dumps(payload, separators=(",", ":"))
    return f"event: {name}\ndata: {data}\n\n".encode()
