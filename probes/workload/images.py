"""Synthetic images for vision probes: PNGs whose pixels are salted per request, so that no
image cache (vLLM hashes an image's pixels, not its file) can answer one request from
another's.

Each image is a smooth colour gradient with a 16 x 16 block of random pixels in its
bottom-left corner, a PNG whose pixels are stored uncompressed: no image is ever compressed on
the loop that times requests, and a request pays only for its last rows (SaltedPng). Stored
PNGs are large (3 bytes a pixel), which is why a request's pixels are bounded
(MAX_REQUEST_PIXELS).
"""

from __future__ import annotations

import base64
import struct
import zlib

import numpy as np
from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel

SALT_SIDE = 16
"""Pixels on a side of the random block."""
MAX_REQUEST_PIXELS = 4 * 1024 * 1024
"""Most pixels one request's images may have in all (12 MiB as a stored PNG, 16 MiB in
base64)."""
STORED_BLOCK = 65_535
"""Bytes of raw data per stored deflate block (the format's most)."""
SIGNATURE = b"\x89PNG\r\n\x1a\n"


class ImageSpec(InputModel):
    """Synthetic images attached to every request of a chat kind."""

    count: int = Field(default=1, ge=1, le=16, description="Images per request.")
    width: int = Field(default=512, ge=SALT_SIDE, le=4096)
    height: int = Field(default=512, ge=SALT_SIDE, le=4096)

    @model_validator(mode="after")
    def _bounded(self) -> ImageSpec:
        if self.count * self.width * self.height > MAX_REQUEST_PIXELS:
            raise PydanticCustomError(
                "too_many_pixels", "count x width x height must stay within {limit} pixels",
                {"field": "count", "limit": MAX_REQUEST_PIXELS})
        return self

    @property
    def size(self) -> str:
        """The images' size as reported: `WIDTHxHEIGHT`."""
        return f"{self.width}x{self.height}"


def _chunk(kind: bytes, data: bytes | bytearray) -> bytes:
    return b"".join((struct.pack(">I", len(data)), kind, data,
                     struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))))


class SaltedPng:
    """One size's PNG, prepared so that `salted(rng)` costs little: the random block sits in
    the bottom-left corner, so every byte before its first row is the same in every image.
    The PNG is an uncompressed (stored) zlib stream; its constant part is base64-encoded once,
    with the CRC-32 of the IDAT chunk and the Adler-32 of the pixels run over it once. A
    request then copies only the last SALT_SIDE rows, writes the block, continues both
    checksums from their saved states over those rows, and base64-encodes them: some 25 KB for
    a 512-pixel-wide image, whatever its height."""

    def __init__(self, width: int, height: int, rgb: np.ndarray | None = None) -> None:
        """A `width` x `height` colour gradient, or the pixels `rgb` (height x width x 3,
        uint8: a dataset's image, at least SALT_SIDE on each side)."""
        self.width, self.height = width, height
        w, h = width, height
        if rgb is None:
            y, x = np.mgrid[0:h, 0:w]
            rgb = np.stack([x * 255 // max(1, w - 1), y * 255 // max(1, h - 1),
                            (x + y) * 255 // max(1, w + h - 2)], axis=-1).astype(np.uint8)
        assert rgb.shape == (h, w, 3)
        assert rgb.dtype == np.uint8
        rows = np.concatenate([np.zeros((h, 1), np.uint8), rgb.reshape(h, w * 3)], axis=1)
        raw = rows.tobytes()
        self.stride = 1 + 3 * w
        split = (h - SALT_SIDE) * self.stride
        """Where the rows that may change start, in the pixel data."""
        stream = stored_stream(raw)
        at = stream_offset(split)
        head = SIGNATURE + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + \
            struct.pack(">I", len(stream)) + b"IDAT"
        constant = head + stream[:at]
        cut = len(constant) - len(constant) % 3
        self.prefix = b"data:image/png;base64," + base64.b64encode(constant[:cut])
        self.carry = constant[cut:]
        """The constant bytes past the last whole base64 group, encoded with the tail."""
        self.crc = zlib.crc32(stream[:at], zlib.crc32(b"IDAT"))
        self.adler = zlib.adler32(raw[:split])
        self.split = split
        self.raw_tail = raw[split:]
        self.stream_tail = stream[at:-4]
        self.stream_at = at

    @property
    def held_bytes(self) -> int:
        """Bytes this template holds, shared by every request that salts it."""
        return len(self.prefix) + len(self.carry) + len(self.raw_tail) + len(self.stream_tail)

    @property
    def uri_bytes(self) -> int:
        """Length of each `salted` data URI: the prefix, then the base64 of the carried bytes,
        the tail of the stream with its Adler-32, the IDAT CRC and the IEND chunk."""
        tail = len(self.carry) + len(self.stream_tail) + 4 + 4 + 12
        return len(self.prefix) + 4 * -(-tail // 3)

    def _patch(self, stream_tail: bytearray, raw_offset: int, data: bytes) -> None:
        """Write `data` at `raw_offset` of the pixel data into the tail of the stream, around
        the stored blocks' headers."""
        for k in range(len(data)):  # at most a few dozen bytes a row
            stream_tail[stream_offset(raw_offset + k) - self.stream_at] = data[k]

    def salted(self, rng: np.random.Generator) -> str:
        """A `data:image/png;base64,...` URI of this size with a fresh random block."""
        block = rng.integers(0, 256, (SALT_SIDE, SALT_SIDE * 3), dtype=np.uint8)
        raw_tail = bytearray(self.raw_tail)
        stream_tail = bytearray(self.stream_tail)
        for row in range(SALT_SIDE):
            offset = row * self.stride + 1
            data = block[row].tobytes()
            raw_tail[offset:offset + len(data)] = data
            self._patch(stream_tail, self.split + offset, data)
        stream_tail += struct.pack(">I", zlib.adler32(raw_tail, self.adler))
        crc = zlib.crc32(stream_tail, self.crc)
        tail = self.carry + bytes(stream_tail) + struct.pack(">I", crc) + _chunk(b"IEND", b"")
        return (self.prefix + base64.b64encode(tail)).decode("ascii")


def stored_stream(raw: bytes) -> bytes:
    """`raw` as a zlib stream of stored (uncompressed) deflate blocks, Adler-32 at its end."""
    out = bytearray(b"\x78\x01")
    for start in range(0, len(raw), STORED_BLOCK):
        piece = raw[start:start + STORED_BLOCK]
        final = 1 if start + STORED_BLOCK >= len(raw) else 0
        out += struct.pack("<BHH", final, len(piece), 0xFFFF ^ len(piece)) + piece
    out += struct.pack(">I", zlib.adler32(raw))
    return bytes(out)


def stream_offset(raw_offset: int) -> int:
    """Where byte `raw_offset` of the pixel data lies in stored_stream's output: after the
    2-byte zlib header and a 5-byte header per block up to and including its own."""
    return 2 + (raw_offset // STORED_BLOCK + 1) * 5 + raw_offset


class ImageMaker:
    """The images of a workload's spec, one template built up front."""

    def __init__(self, spec: ImageSpec) -> None:
        self.spec = spec
        self.template = SaltedPng(spec.width, spec.height)

    @property
    def request_bytes(self) -> int:
        """Bytes of the data URIs one request carries."""
        return self.spec.count * self.template.uri_bytes

    def data_uris(self, rng: np.random.Generator) -> list[str]:
        """`count` salted images as `data:image/png;base64,...` URIs."""
        return [self.template.salted(rng) for _ in range(self.spec.count)]
