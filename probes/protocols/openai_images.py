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
the completed events (one per image, for their usage) and unnamed events are parsed. An image
event may be far larger than a chat chunk, so the kind's events are capped at
IMAGE_EVENT_BYTES (or the target's cap, if larger), and a whole answer at IMAGES_BODY_LIMIT.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.sse import SSEEvent
from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import NS_PER_MS, ErrorClass, Measurement
from sustain.probes.protocols.base import ApiProtocol, KindSettings
from sustain.probes.protocols.openai_responses import error_class_of
from sustain.probes.protocols.streaming import (
    StreamState,
    failure,
    json_object,
    token_count,
)

IMAGE_EVENT_BYTES = 16 * 1024 * 1024
"""Cap on one SSE event of an image stream: a partial or completed image's base64 (a
1536 x 1024 PNG is a few MiB of it), held until the event ends."""
IMAGES_BODY_LIMIT = 64 * 1024 * 1024
"""Cap on a whole image answer, held until it ends: up to ten images' base64 (past it,
`protocol`)."""
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

    def on_event(self, event: SSEEvent, now_ns: int) -> None:
        if event.event == PARTIAL_IMAGE:  # counted by its name: its base64 is not parsed
            if self.failure is None and not self.done:
                self._partial(now_ns)
            return
        found = self.typed(event, error_class_of)
        if found is None:
            return
        kind, payload = found
        if kind == PARTIAL_IMAGE:
            self._partial(now_ns)
        elif kind == COMPLETED_IMAGE:
            self.images += 1
            self.output_at(now_ns)
            output, prompt = usage_counts(payload.get("usage"))
            if output is not None:  # each image's event counts that image's tokens
                output += self.completion_tokens or 0
            self.counted(output, prompt, None)
            self.finished = True

    def _partial(self, now_ns: int) -> None:
        self.partials += 1
        self.output_at(now_ns)

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


def whole_response(raw: bytes, t_send_ns: int, end: int, status: int) -> Measurement:
    """Measure a whole image answer (`{"data": [...]}`) that ended at `end` (ns)."""
    payload = json_object(raw)
    if isinstance(payload, str):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, payload)
    data = payload.get("data")
    if not isinstance(data, list):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, "data is not a list")
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
