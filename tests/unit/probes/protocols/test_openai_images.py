"""Reading image generations: whole answers counted in images (b64_json or url), streams timed
from their first image event (a partial image, counted by its name without its base64 being
parsed) and counted in completed images, and the request's shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sustain.probes.client.sse import MAX_EVENT_BYTES, SSEEvent
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.openai_images import (
    COMPLETED_IMAGE,
    IMAGE_EVENT_BYTES,
    OPENAI_IMAGES,
    PARTIAL_IMAGE,
    ImageStream,
    whole_response,
)
from sustain.probes.protocols.streaming import from_state
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.spec import Workload

MS = 1_000_000


def whole(payload: dict[str, Any] | bytes) -> Measurement:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return whole_response(raw, 0, 250 * MS, 200)


def test_a_whole_answer_counts_its_images_as_items() -> None:
    m = whole({"created": 1, "data": [{"b64_json": "aGk="}, {"url": "https://x/y.png"}],
               "usage": {"input_tokens": 9, "output_tokens": 544}})
    assert m.error_class is None
    assert (m.items, m.e2e_ms, m.ttft_ms) == (2, 250.0, None)
    assert (m.output_tokens, m.tokens_server_counted, m.input_tokens) == (544, True, 9)


@pytest.mark.parametrize(("payload", "expected"), [
    ({"data": []}, ErrorClass.EMPTY),
    ({"data": [{"revised_prompt": "no image"}]}, ErrorClass.PROTOCOL),
    ({"data": ["aGk="]}, ErrorClass.PROTOCOL),
    ({"data": {"b64_json": "aGk="}}, ErrorClass.PROTOCOL),
    (b'{"data": [{"b64_json": "', ErrorClass.PROTOCOL),
])
def test_an_answer_without_images_fails(payload: dict[str, Any] | bytes,
                                        expected: ErrorClass) -> None:
    m = whole(payload)
    assert m.error_class is expected
    assert m.items is None


def partial(name: str = PARTIAL_IMAGE, data: str = "{not json: never parsed") -> SSEEvent:
    return SSEEvent(name, data)


def completed(output_tokens: int = 272) -> SSEEvent:
    return SSEEvent(COMPLETED_IMAGE, json.dumps({
        "type": COMPLETED_IMAGE, "b64_json": "aGk=",
        "usage": {"input_tokens": 5, "output_tokens": output_tokens}}))


def test_a_stream_is_timed_from_its_first_partial_image_and_counts_completed_images() -> None:
    state = ImageStream()
    for event, at_ms in ((partial(), 40), (partial(), 80), (completed(), 120),
                         (partial(), 160), (completed(), 200)):
        state.on_event(event, at_ms * MS)
    assert state.outcome() == (None, None)
    assert (state.partials, state.images) == (3, 2)
    assert state.first_output_ns == 40 * MS
    assert list(state.itl_ns) == [40 * MS] * 4
    assert (state.output_tokens, state.prompt_tokens) == (544, 5)  # each image's usage, summed
    m = OPENAI_IMAGES.stream_figures(from_state(state, 0, 210 * MS, 200, None, None), state)
    assert (m.items, m.ttft_ms) == (2, 40.0)


def test_without_partial_images_the_first_image_is_the_first_output() -> None:
    state = ImageStream()
    state.on_event(completed(), 90 * MS)
    assert state.first_output_ns == 90 * MS
    assert state.outcome() == (None, None)


def test_unnamed_events_are_parsed_for_their_type() -> None:
    state = ImageStream()
    state.on_event(SSEEvent("message", json.dumps({"type": PARTIAL_IMAGE})), 1)
    state.on_event(SSEEvent("message", completed().data), 2)
    assert (state.partials, state.images) == (1, 1)


def test_a_stream_without_a_completed_image_is_truncated_and_errors_fail_it() -> None:
    cut = ImageStream()
    cut.on_event(partial(), 1)
    assert cut.outcome()[0] is ErrorClass.TRUNCATED
    failed = ImageStream()
    failed.on_event(SSEEvent("error", json.dumps(
        {"type": "error", "error": {"code": "server_error"}})), 1)
    assert failed.outcome()[0] is ErrorClass.HTTP_5XX
    malformed = ImageStream()
    malformed.on_event(SSEEvent("message", '{"type": "image_generation.'), 1)
    assert malformed.outcome()[0] is ErrorClass.PROTOCOL


def test_a_failed_stream_reports_no_items() -> None:
    state = ImageStream()
    state.on_event(completed(), 1)
    m = from_state(state, 0, 2, 200, ErrorClass.TRUNCATED, "cut")
    assert OPENAI_IMAGES.stream_figures(m, state).items is None


def test_an_image_event_may_be_larger_than_a_chat_chunk() -> None:
    assert OPENAI_IMAGES.event_bytes(MAX_EVENT_BYTES) == IMAGE_EVENT_BYTES
    assert OPENAI_IMAGES.event_bytes(2 * IMAGE_EVENT_BYTES) == 2 * IMAGE_EVENT_BYTES


def test_an_images_request_carries_n_size_and_streaming_and_no_output_cap() -> None:
    streamed = RequestBuilder(Workload(prompt="a red fox", output_images=2,
                                       output_image_size="1536x1024", partial_images=2,
                                       cache="allow"), OPENAI_IMAGES.kind, "img").body(0)
    assert streamed == {"model": "img", "prompt": "a red fox", "n": 2, "size": "1536x1024",
                        "stream": True, "partial_images": 2}
    whole_body = RequestBuilder(Workload(prompt="x", stream=False, partial_images=2),
                                OPENAI_IMAGES.kind, "img").body(0)
    assert "stream" not in whole_body
    assert "partial_images" not in whole_body
    assert (whole_body["n"], whole_body["size"]) == (1, "1024x1024")


@pytest.mark.parametrize("size", ["1024", "0x10", "big", "1024x1024x2"])
def test_an_image_size_is_widthxheight_or_auto(size: str) -> None:
    with pytest.raises(ValueError, match="output_image_size"):
        Workload(output_image_size=size)
    assert Workload(output_image_size="auto").output_image_size == "auto"
