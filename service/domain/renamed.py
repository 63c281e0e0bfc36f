"""Field names given up for one spelling: every duration in the API ends in `_s`.

The old names are still accepted in request bodies for one release: a body that uses one is
read as if it had used the new name, and the response carries a `Warning: 299` header per old
name (as Kubernetes warns of deprecated API use). Responses carry both names until then.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pydantic_core import PydanticCustomError

RENAMED_FIELDS: Mapping[str, str] = {
    "interval_seconds": "interval_s",
    "jitter_seconds": "jitter_s",
}
"""Deprecated request field name -> its name now."""

_notes: ContextVar[list[str] | None] = ContextVar("sustain_deprecation_notes", default=None)


def deprecation_note(old: str, new: str) -> str:
    """What a response says of one deprecated name."""
    return f"{old} is deprecated and will be removed in the next release: use {new}"


def accept_renamed(data: Any, renamed: Mapping[str, str] = RENAMED_FIELDS) -> Any:
    """A request body with each deprecated name replaced by its new one (noted for the
    response); a body giving both names of one field is refused, naming the old one."""
    if not isinstance(data, dict):
        return data
    present = [old for old in renamed if old in data]
    if not present:
        return data
    out = dict(data)
    for old in present:
        new = renamed[old]
        if new in out:
            raise PydanticCustomError(
                "renamed", "give only {new} ({old} is its deprecated name)",
                {"field": old, "new": new, "old": old})
        out[new] = out.pop(old)
        notes = _notes.get()
        if notes is not None:
            notes.append(deprecation_note(old, new))
    return out


@contextmanager
def collecting_notes() -> Iterator[list[str]]:
    """Collect the deprecation notes of what runs inside (one request)."""
    notes: list[str] = []
    token = _notes.set(notes)
    try:
        yield notes
    finally:
        _notes.reset(token)
