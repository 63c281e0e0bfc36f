"""The byte-level integer encodings of a packed sample column: a column's head (its mode, a
presence flag and its section's length as a LEB128 varint), zigzag for signed values,
differences from the previous value for steadily growing ones, and byte planes, which put
each value's lowest bytes together so that zlib finds the runs of zero and near-equal bytes.
Pure functions; a malformed input is a ValueError."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

PRESENCE = 0x80
"""In a column's first byte, beside its mode: a byte per sample follows (1: it has a value);
without it every sample has one. Then, for a mode with a section, the section's length as a
LEB128 varint (a block of one sample spends a byte or two per column, not six)."""


def column_head(mode: int, presence: bool, length: int | None) -> bytes:
    head = bytes([mode | (PRESENCE if presence else 0)])
    if length is None:
        return head
    out = bytearray(head)
    while True:
        byte, length = length & 0x7F, length >> 7
        out.append(byte | (0x80 if length else 0))
        if not length:
            return bytes(out)


def read_length(data: bytes, offset: int) -> tuple[int, int]:
    """(a varint at `offset`, the offset after it); at most 5 bytes (under 2**35)."""
    value = 0
    for shift in range(0, 35, 7):
        if offset >= len(data):
            raise ValueError("a block cut short")
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
    raise ValueError("a column length of more than five bytes")


def zigzag(values: Sequence[int]) -> list[int]:
    return [(v << 1) ^ (v >> 63) for v in values]


def unzigzag(values: Sequence[int]) -> list[int]:
    return [(v >> 1) ^ -(v & 1) for v in values]


def planes(values: Sequence[int]) -> bytes:
    """Non-negative ints below 2**64 as byte planes: a width byte (1, 2, 4 or 8), then the
    lowest byte of every value, then the next byte of every value, and so on."""
    top = max(values, default=0)
    width = 1 if top < 2**8 else 2 if top < 2**16 else 4 if top < 2**32 else 8
    raw = array({1: "B", 2: "H", 4: "I", 8: "Q"}[width], values)
    if raw.itemsize != width:  # pragma: no cover - every platform Python runs on has these
        raise RuntimeError("unexpected array item size")
    if raw.itemsize > 1 and array("H", [1]).tobytes()[0] != 1:  # pragma: no cover
        raw.byteswap()
    flat = raw.tobytes()
    return bytes([width]) + b"".join(flat[i::width] for i in range(width))


def unplanes(data: bytes, count: int) -> list[int]:
    if not data:
        raise ValueError("a column without its width")
    width = data[0]
    if width not in (1, 2, 4, 8) or len(data) != 1 + width * count:
        raise ValueError("a column's values do not fill it")
    body = data[1:]
    flat = bytearray(width * count)
    for i in range(width):
        flat[i::width] = body[i * count:(i + 1) * count]
    raw = array({1: "B", 2: "H", 4: "I", 8: "Q"}[width])
    raw.frombytes(bytes(flat))
    if raw.itemsize > 1 and array("H", [1]).tobytes()[0] != 1:  # pragma: no cover
        raw.byteswap()
    return raw.tolist()


def deltas(values: Sequence[int]) -> list[int]:
    previous = 0
    out = []
    for value in values:
        out.append(value - previous)
        previous = value
    return out


def sums(values: Sequence[int]) -> list[int]:
    total = 0
    out = []
    for value in values:
        total += value
        out.append(total)
    return out
