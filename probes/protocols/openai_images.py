"""The OpenAI image generation protocol (`POST /v1/images/generations`: `model`, `prompt`, `n`,
`size`, and `stream: true` with `partial_images` where the images are to stream), as OpenAI,
LiteLLM and the OpenAI-compatible image servers speak it. The prompt is the request's prompt
(synthetic words, the fixed prompt or a dataset's line); `response_format` (`b64_json` or
`url`, which gpt-image models refuse) is the workload's extra_body's to give.

A whole answer is `{"data": [{"b64_json": ...} | {"url": ...}, ...]}` (with `usage` where the
server counts): Measurement.items is the images it holds (so a run's items and
items_per_second are images per request and per second) and the latency is E2E. A stream is
`image_generation.partial_image` events, then `image_generation.completed` (one per image,
with that image's usage, summed over the images): TTFT is the first image event's arrival
(the first partial image, or the image itself without partial images), ITL the gaps between
image events, items the completed images. An answer with no image is `empty`; a stream that
ends before any completed image is `truncated`.

Images are counted, never decoded: a partial image's event is counted by its name
(`event: image_generation.partial_image`) without parsing its megabytes of base64, and only
the completed events (one per image, for their usage) and unnamed events are parsed, with
their base64 cut out first (`without_base64`), as a whole answer's is. An image
event may be far larger than a chat chunk, so the kind's events are capped at
IMAGE_EVENT_BYTES (or the target's cap, if larger), and a whole answer at IMAGES_BODY_LIMIT.

An answer is the endpoint's to shape, and read as hostile: a stream is bounded in its image
events (MAX_IMAGES, each an ITL gap held) and in its events' data (IMAGE_STREAM_BYTES), a
whole answer in its images (MAX_IMAGES) and, before it is parsed on the event loop, in its
JSON values (MAX_JSON_VALUES); past any of them the answer is `protocol`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.sse import SSEEvent, size_text
from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import NS_PER_MS, ErrorClass, Measurement
from sustain.probes.protocols.base import ApiProtocol, KindSettings
from sustain.probes.protocols.openai_responses import error_class_of
from sustain.probes.protocols.streaming import (
    StreamState,
    failure,
    json_object,
)
from sustain.probes.protocols.usage_counts import token_count

IMAGE_EVENT_BYTES = 16 * 1024 * 1024
"""Cap on one SSE event of an image stream: a partial or completed image's base64 (a
1536 x 1024 PNG is a few MiB of it), held until the event ends."""
IMAGES_BODY_LIMIT = 64 * 1024 * 1024
"""Cap on a whole image answer, held until it ends: up to ten images' base64 (past it,
`protocol`)."""
IMAGE_STREAM_BYTES = 4 * IMAGES_BODY_LIMIT
"""Most event data of one image stream: ten images' base64 (IMAGES_BODY_LIMIT) in their
completed events and three partial images each; past it `protocol`, the rest unread."""
MAX_IMAGES = 1024
"""Most images (partial images included) of one answer: OpenAI's most is ten images (`n`)
with three partial images each. Each streamed one is an ITL gap held until the stream ends,
and a partial image costs no parse, so without the bound a stream of millions of tiny ones
would hold memory for as long as the total timeout lets it run."""
MAX_JSON_VALUES = 65_536
"""Most values of a whole image answer, counted as its commas (one between any two values;
base64 has none) before it is parsed on the event loop: its images and usage need dozens.
A body of millions of tiny values (`{"url":"a"}` five million times in 64 MiB) would take the
loop seconds and a gigabyte of objects to parse."""
LARGE_EVENT_CHARS = 64 * 1024
"""An unnamed event past this many characters is an image's (a chat-sized event is a few
hundred): its base64 is cut (`without_base64`) before it is parsed for its type and usage."""
B64_KEY = b'"b64_json"'
B64_VALUE = re.compile(rb'[ \t\r\n]{0,16}:[ \t\r\n]{0,16}"')
"""What follows a `b64_json` key up to its string's first character, in the spellings JSON
writers use (a bounded run of whitespace, so matching it costs the loop little)."""
PARTIAL_IMAGE = "image_generation.partial_image"
COMPLETED_IMAGE = "image_generation.completed"


def usage_counts(usage: Any) -> tuple[int | None, int | None]:
    """(output, input) tokens of an image usage (`output_tokens`, `input_tokens`)."""
    if not isinstance(usage, dict):
        return None, None
    return token_count(usage.get("output_tokens")), token_count(usage.get("input_tokens"))


@dataclass(slots=True)
class ImageStream(StreamState):
    """A streamed image answer, read event by event (see the module)."""

    images: int = 0
    """Completed images."""
    partials: int = 0
    """Partial images."""
    data_bytes: int = 0
    """Characters of event data received, against IMAGE_STREAM_BYTES."""
    uncounted: bool = False
    """The images' usages summed past a plausible count: the server's count is dropped."""

    def on_event(self, event: SSEEvent, now_ns: int) -> None:
        if self.failure is not None or self.done:
            return
        self.data_bytes += len(event.data)
        if self.data_bytes > IMAGE_STREAM_BYTES:
            self.fail(ErrorClass.PROTOCOL, f"image stream over {size_text(IMAGE_STREAM_BYTES)}")
            return
        if event.event == PARTIAL_IMAGE:  # counted by its name: its base64 is not parsed
            self._image(now_ns, completed=False)
            return
        if len(event.data) > LARGE_EVENT_CHARS:  # an image's: parsed without its base64
            event = SSEEvent(event.event, without_base64(event.data.encode()).decode())
        found = self.typed(event, error_class_of)
        if found is None:
            return
        kind, payload = found
        if kind == PARTIAL_IMAGE:
            self._image(now_ns, completed=False)
        elif kind == COMPLETED_IMAGE and self._image(now_ns, completed=True):
            self._count(payload.get("usage"))
            self.finished = True

    def _count(self, usage: Any) -> None:
        """A completed image's usage: each image's event counts that image's tokens, summed
        over the images, while the sum is a plausible count (streaming.token_count); once it
        is not, the server's count is dropped for good (an output past 2**31 - 1 tokens is
        no count, and no sample's row could hold it)."""
        output, prompt = usage_counts(usage)
        if output is not None and not self.uncounted:
            output = token_count(output + (self.completion_tokens or 0))
            if output is None:
                self.uncounted, self.completion_tokens = True, None
        self.counted(None if self.uncounted else output, prompt, None)

    def _image(self, now_ns: int, *, completed: bool) -> bool:
        """An image event (a completed or a partial image) arrived at `now_ns`: counted, unless
        it is past MAX_IMAGES, which fails the stream (False)."""
        if self.images + self.partials >= MAX_IMAGES:
            self.fail(ErrorClass.PROTOCOL, f"image stream over {MAX_IMAGES} images")
            return False
        if completed:
            self.images += 1
        else:
            self.partials += 1
        self.output_at(now_ns)
        return True

    def outcome(self) -> tuple[ErrorClass | None, str | None]:
        """Failed as the stream said; else truncated before any completed image."""
        if self.failure is not None:
            return self.failure, self.detail
        if not self.complete or self.images == 0:
            return ErrorClass.TRUNCATED, f"image stream ended before {COMPLETED_IMAGE}"
        return None, None

    @property
    def output_tokens(self) -> int:
        """The server's count of output tokens, where its usage gave one; else 0."""
        return self.completion_tokens if self.completion_tokens is not None else 0


def images_problem(data: list[Any]) -> str | None:
    """Why `data` is not a list of images (`b64_json` or `url`), or None."""
    for item in data:
        if not isinstance(item, dict):
            return "image item is not an object"
        image = item.get("b64_json", item.get("url"))
        if not isinstance(image, str) or not image:
            return "image item has neither b64_json nor url"
    return None


def without_base64(raw: bytes) -> bytes:
    """A whole image answer with each image's base64 (a `b64_json` string, non-empty) cut to
    one character: what is read of an image is that it is there, so its base64 is never
    parsed. Finding each is a search through the body at memchr speed (a few ms for 60 MiB)
    where parsing it is a copy into strings (hundreds of ms on the event loop for ten large
    images). A string ends at the first quote after its own, as base64 holds no quote and no
    escaped one (an answer where one does is cut there, and is malformed JSON); in valid JSON
    `"b64_json"` followed by a colon is a key (its last quote ends a string, so a colon after
    it makes that string a key). Where the JSON spells it otherwise (more whitespace than
    B64_VALUE allows), the string is left, and parsed."""
    parts: list[bytes] = []
    kept = at = 0  # where the part of `raw` still to keep starts; where the search goes on
    while (key := raw.find(B64_KEY, at)) >= 0:
        at = key + len(B64_KEY)
        opening = B64_VALUE.match(raw, at)
        if opening is None:
            continue
        value = opening.end()
        close = raw.find(b'"', value)
        if close < 0:
            break
        if close > value:
            parts += (raw[kept:value], b"x")
            kept = close
        at = close + 1
    if not parts:
        return raw
    parts.append(raw[kept:])
    return b"".join(parts)


def whole_response(raw: bytes, t_send_ns: int, end: int, status: int) -> Measurement:
    """Measure a whole image answer (`{"data": [...]}`) that ended at `end` (ns), its base64
    unparsed (`without_base64`): refused unparsed past MAX_JSON_VALUES, and past MAX_IMAGES
    images."""
    raw = without_base64(raw)
    if raw.count(b",") >= MAX_JSON_VALUES:
        return failure(t_send_ns, status, ErrorClass.PROTOCOL,
                       f"image answer of over {MAX_JSON_VALUES} JSON values")
    payload = json_object(raw)
    if isinstance(payload, str):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, payload)
    data = payload.get("data")
    if not isinstance(data, list):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, "data is not a list")
    if len(data) > MAX_IMAGES:
        return failure(t_send_ns, status, ErrorClass.PROTOCOL,
                       f"image answer of over {MAX_IMAGES} images")
    problem = "no images" if not data else images_problem(data)
    error = None if problem is None else ErrorClass.EMPTY if not data else ErrorClass.PROTOCOL
    output, prompt = usage_counts(payload.get("usage"))
    return Measurement(
        ttft_ms=None, itl_ms=(), e2e_ms=(end - t_send_ns) / NS_PER_MS,
        output_tokens=output or 0, tokens_server_counted=output is not None,
        input_tokens=prompt, http_status=status, error_class=error, error_detail=problem,
        items=len(data) if error is None else None)


class OpenAIImages(ApiProtocol):
    kind: ClassVar[ApiKind] = ApiKind.OPENAI_IMAGES
    path: ClassVar[str] = "/images/generations"
    otel_operation: ClassVar[str | None] = "generate_content"
    otel_provider: ClassVar[str | None] = "openai"
    stream_type: ClassVar[type[StreamState]] = ImageStream
    workload_fields: ClassVar[frozenset[str]] = frozenset(
        {"output_images", "output_image_size", "partial_images"})
    figures: ClassVar[tuple[str, ...]] = ("ttft_ms", "itl_ms", "items", "output_tokens",
                                          "input_tokens")
    """items: the images an answer held (completed images of a stream)."""
    whole_body_limit: ClassVar[int] = IMAGES_BODY_LIMIT

    def body_for(self, body: dict[str, Any], settings: KindSettings) -> dict[str, Any]:
        """`prompt`, `n`, `size`; streamed, `stream: true` and `partial_images`; no output
        cap."""
        for key in ("max_tokens", "stream_options"):
            body.pop(key, None)
        body["n"] = settings.output_images
        body["size"] = settings.output_image_size
        if settings.stream:
            body["stream"] = True
            if settings.partial_images:
                body["partial_images"] = settings.partial_images
        else:
            body.pop("stream", None)
        return body

    def event_bytes(self, target_cap: int) -> int:
        return max(target_cap, IMAGE_EVENT_BYTES)

    def stream_figures(self, measurement: Measurement, state: StreamState) -> Measurement:
        """A stream's completed images, of a successful request."""
        if not isinstance(state, ImageStream) or measurement.error_class is not None or \
                not state.images:
            return measurement
        return replace(measurement, items=state.images)

    def whole(self, raw: bytes, t_send_ns: int, end: int, status: int,
              keep_reply: bool = False,  # noqa: ARG002 - an image answer keeps nothing
              expect: ExpectedItems | None = None) -> Measurement:  # noqa: ARG002
        return whole_response(raw, t_send_ns, end, status)


OPENAI_IMAGES = OpenAIImages()
