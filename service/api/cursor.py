"""Opaque pagination cursors: a kind and a position, base64url-encoded. Clients pass them back
unchanged; a cursor of another kind, or not ours at all, is a 422 naming `query.cursor`.

A position is one integer (an id: `encode`/`decode`), or for lists ordered by more than one
column a tuple of integers and strings (`encode_key`/`decode_key`), the last row's sort key."""

from __future__ import annotations

import base64
import binascii
import json

from sustain.service.errors import FieldError

FIELD = "query.cursor"
NOT_OURS = "not a cursor this API returned"

Key = tuple[int | str, ...]


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _text(cursor: str) -> str:
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise FieldError(FIELD, NOT_OURS) from None


def encode(kind: str, position: int) -> str:
    return _b64(f"{kind}:{position}")


def decode(kind: str, cursor: str | None) -> int | None:
    if cursor is None:
        return None
    found, _, position = _text(cursor).partition(":")
    try:
        value = int(position)
    except ValueError:
        raise FieldError(FIELD, NOT_OURS) from None
    if found != kind or not -1 <= value < 2**63:
        raise FieldError(FIELD, NOT_OURS) from None
    return value


def encode_key(kind: str, key: Key) -> str:
    return _b64(f"{kind}:{json.dumps(list(key), separators=(',', ':'))}")


def decode_key(kind: str, cursor: str | None, shape: tuple[type[int] | type[str], ...]
               ) -> Key | None:
    """The key of a cursor from `encode_key(kind, ...)` whose parts have the types of
    `shape` (integers within 64 bits); 422 naming `query.cursor` for anything else."""
    if cursor is None:
        return None
    found, _, rest = _text(cursor).partition(":")
    try:
        parts = json.loads(rest)
    except ValueError:
        raise FieldError(FIELD, NOT_OURS) from None
    if found != kind or not isinstance(parts, list) or len(parts) != len(shape) or not all(
            type(part) is want and (not isinstance(part, int) or -1 <= part < 2**63)
            for part, want in zip(parts, shape, strict=True)):
        raise FieldError(FIELD, NOT_OURS)
    return tuple(parts)
