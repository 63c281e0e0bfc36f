"""Synthetic images: valid PNGs of the asked size, their pixels salted per request (the random
block differs, the rest is the same picture), attached to the last user message in each chat
protocol's own shape, and bounded in pixels."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from sustain.probes.client.target import ApiKind
from sustain.probes.workload.images import SALT_SIDE, ImageSpec, SaltedPng
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.spec import Workload


def pixels(uri: str) -> np.ndarray:
    """The RGB pixels of a data URI made by SaltedPng (one IDAT, filter 0 on every row), its
    chunks' CRCs checked (zlib checks the stream's Adler-32)."""
    head, _, encoded = uri.partition(",")
    assert head == "data:image/png;base64"
    png = base64.b64decode(encoded, validate=True)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", png[16:24])
    at, data = 8, b""
    while at < len(png):
        (length,) = struct.unpack(">I", png[at:at + 4])
        kind, body = png[at + 4:at + 8], png[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", png[at + 8 + length:at + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        if kind == b"IDAT":
            data += body
        at += 12 + length
    raw = np.frombuffer(zlib.decompress(data), np.uint8).reshape(height, 1 + width * 3)
    assert not raw[:, 0].any()
    return raw[:, 1:].reshape(height, width, 3)


def test_a_salted_png_decodes_to_the_picture_with_a_random_corner() -> None:
    template = SaltedPng(200, 70)
    one = pixels(template.salted(np.random.default_rng(1)))
    two = pixels(template.salted(np.random.default_rng(2)))
    assert one.shape == (70, 200, 3)
    assert (one[:-SALT_SIDE] == two[:-SALT_SIDE]).all()
    assert (one[:, SALT_SIDE:] == two[:, SALT_SIDE:]).all()
    assert (one[-SALT_SIDE:, :SALT_SIDE] != two[-SALT_SIDE:, :SALT_SIDE]).any()


@pytest.mark.parametrize(("width", "height"), [(300, 300), (1024, 700), (16, 16), (4096, 17)])
def test_images_of_every_shape_stay_valid_across_stored_blocks(width: int, height: int
                                                               ) -> None:
    """Sizes whose salted rows straddle the 65,535-byte stored blocks, or fill the image."""
    template = SaltedPng(width, height)
    for seed in range(3):
        assert pixels(template.salted(np.random.default_rng(seed))).shape == (height, width, 3)


def test_a_request_may_not_carry_more_than_the_pixel_bound() -> None:
    with pytest.raises(ValidationError) as caught:
        ImageSpec(count=16, width=1024, height=1024)
    assert caught.value.errors()[0]["ctx"]["field"] == "count"
    assert ImageSpec(count=4, width=1024, height=1024).size == "1024x1024"


def images_of(kind: ApiKind, cache: str = "defeat"
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Request 0's body, built twice."""
    builder = RequestBuilder(Workload.model_validate(
        {"images": {"count": 2, "width": 32, "height": 32}, "cache": cache}), kind, "m")
    return builder.body(0), builder.body(0)


def uris(body: dict[str, Any], kind: ApiKind) -> list[str]:
    messages = body["input"] if kind is ApiKind.OPENAI_RESPONSES else body["messages"]
    found = []
    for part in messages[-1]["content"]:
        if part["type"] == "image_url":
            found.append(part["image_url"]["url"])
        elif part["type"] == "input_image":
            found.append(part["image_url"])
        elif part["type"] == "image":
            found.append("data:image/png;base64," + part["source"]["data"])
    return found


@pytest.mark.parametrize("kind", [ApiKind.OPENAI_CHAT, ApiKind.OPENAI_RESPONSES,
                                  ApiKind.ANTHROPIC_MESSAGES])
def test_every_request_attaches_its_own_images_in_the_protocols_shape(kind: ApiKind) -> None:
    first, again = images_of(kind)
    images = uris(first, kind)
    assert len(images) == 2
    assert all(uri.startswith("data:image/png;base64,") for uri in images)
    assert pixels(images[0]).shape == (32, 32, 3)
    assert set(images).isdisjoint(uris(again, kind)), "salted per request"


def test_with_the_cache_allowed_a_request_sends_the_same_images_every_run() -> None:
    first, again = images_of(ApiKind.OPENAI_CHAT, cache="allow")
    assert uris(first, ApiKind.OPENAI_CHAT) == uris(again, ApiKind.OPENAI_CHAT)


def test_completions_carry_no_images() -> None:
    body = RequestBuilder(Workload.model_validate(
        {"images": {"count": 1, "width": 32, "height": 32}}), ApiKind.OPENAI_COMPLETIONS,
        "m").body(0)
    assert isinstance(body["prompt"], str)
