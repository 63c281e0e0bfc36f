"""Field names given up for one spelling that says its unit (docs/api.md, "Names and units"):
a duration ends in `_s` or `_ms`, a rate in `_per_second`, a share in `_ratio`.

An old name is still accepted on input for one release: a body that uses it is read as if it
had used the new name, and (in an API request) the response carries a `Warning: 299` header
per old name, as Kubernetes warns of deprecated API use. Responses carry both names until
then: the models keep the old one as a deprecated computed field, so a body read from the API
and sent back (both names, the same value) is taken as it is, without a warning.

The probes library holds the mechanism (its models, Workload and RunSummary, rename fields
too); the service collects the notes per request (sustain.service.api.deprecation).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pydantic import computed_field
from pydantic_core import PydanticCustomError

WORKLOAD_RENAMED: Mapping[str, str] = {"audio_seconds": "audio_s"}
"""Deprecated Workload field name -> its name now."""

SUMMARY_RENAMED: Mapping[str, str] = {
    "request_throughput": "requests_per_second",
    "output_token_throughput": "output_tokens_per_second",
    "input_token_throughput": "input_tokens_per_second",
    "item_throughput": "items_per_second",
    "audio_seconds": "audio_s",
    "rtf": "rtf_ratio",
    "retrieval_hit_rate": "retrieval_hit_ratio",
}
"""Deprecated name of a run summary's (and a window's, and a comparison's) figure -> its name
now, the unit of the Prometheus gauge's (sustain_probe_last_run_requests_per_second, ...)."""

def stored_figure(summary: Mapping[str, Any], new: str) -> Any:
    """A stored summary's figure by its new name, or by its old one in a summary stored
    before the rename (those keep their old names until they expire); None when neither."""
    if new in summary:
        return summary[new]
    old = next((o for o, n in SUMMARY_RENAMED.items() if n == new), None)
    return None if old is None else summary.get(old)


def old_name(new: str, answers: Any) -> Any:
    """A model's deprecated field: a read-only computed field answering the value of `new`
    (of type `answers`) under the old name it is assigned to, marked deprecated in the
    schema, until the next release. `old = old_name("new_s", float)` in a model's body."""

    def value(self: Any) -> Any:
        return getattr(self, new)

    note = f"Deprecated name of {new}, answered until the next release."
    field = computed_field(return_type=answers, description=note,
                           json_schema_extra={"deprecated": True})
    return field(property(value, doc=note))


_notes: ContextVar[list[str] | None] = ContextVar("sustain_deprecation_notes", default=None)


def deprecation_note(old: str, new: str) -> str:
    """What a response says of one deprecated name."""
    return f"{old} is deprecated and will be removed in the next release: use {new}"


def accept_renamed(data: Any, renamed: Mapping[str, str]) -> Any:
    """A body with each deprecated name replaced by its new one (noted for the response).
    Both names of one field with the same value are a body the API answered sent back: the
    old one is dropped, unnoted; with different values the body is refused, naming the old
    one."""
    if not isinstance(data, dict):
        return data
    present = [old for old in renamed if old in data]
    if not present:
        return data
    out = dict(data)
    for old in present:
        new = renamed[old]
        if new in out:
            if out[new] == out[old]:
                del out[old]
                continue
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
