"""Field names given up for one spelling: every duration in the API ends in `_s`.

The old names are still accepted in request bodies for one release: a body that uses one is
read as if it had used the new name, and the response carries a `Warning: 299` header per old
name (as Kubernetes warns of deprecated API use). Responses carry both names until then. The
mechanism is the probes library's (sustain.probes.renamed), whose models rename fields too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sustain.probes.renamed import accept_renamed as _accept_renamed
from sustain.probes.renamed import collecting_notes, deprecation_note

__all__ = ["RENAMED_FIELDS", "accept_renamed", "collecting_notes", "deprecation_note"]

RENAMED_FIELDS: Mapping[str, str] = {
    "interval_seconds": "interval_s",
    "jitter_seconds": "jitter_s",
}
"""Deprecated probe body field name -> its name now."""


def accept_renamed(data: Any, renamed: Mapping[str, str] = RENAMED_FIELDS) -> Any:
    """A request body with each deprecated name replaced by its new one (see
    sustain.probes.renamed.accept_renamed)."""
    return _accept_renamed(data, renamed)
