"""Opaque pagination cursors: a kind and a position, base64url-encoded. Clients pass them back
unchanged; a cursor of another kind, or not ours at all, is a 422 naming `query.cursor`."""

from __future__ import annotations

import base64
import binascii

from sustain.service.errors import FieldError

FIELD = "query.cursor"


def encode(kind: str, position: int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{position}".encode()).decode().rstrip("=")


def decode(kind: str, cursor: str | None) -> int | None:
    if cursor is None:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        found, _, position = text.partition(":")
        value = int(position)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise FieldError(FIELD, "not a cursor this API returned") from None
    if found != kind or not -1 <= value < 2**63:
        raise FieldError(FIELD, "not a cursor this API returned") from None
    return value
