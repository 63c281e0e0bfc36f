"""Notifier rows: the one mapping between the notifier schemas and their columns, used by the
REST routes and the config-file sync alike. Whatever its kind, a notifier is the same row."""

from __future__ import annotations

from sustain.service.db.models import Notifier
from sustain.service.schemas.notifiers import NotifierRead, NotifierSpec, NotifierUpdate

OPTIONAL_COLUMNS = ("url", "url_secret_ref", "signing_secret_ref")
"""Columns a kind's spec may leave out (null when it does)."""
SPEC_COLUMNS = ("name", *OPTIONAL_COLUMNS, "match", "send_resolved", "enabled", "timeout_s")
"""The stored columns a notifier's spec is made of (besides its kind)."""


def read(notifier: Notifier) -> NotifierRead:
    """What the API answers for a stored notifier (secrets stay references)."""
    return NotifierRead.model_validate(notifier, from_attributes=True)


def columns(body: NotifierSpec | NotifierUpdate, *, partial: bool = False
            ) -> dict[str, object]:
    """Column values of a body: every column (null where the kind has no such field), or
    (partial) only those the caller set."""
    values = body.model_dump(mode="json", exclude_unset=partial)
    if values.get("kind") is None:
        values.pop("kind", None)
    if partial:
        return values
    return {name: None for name in OPTIONAL_COLUMNS} | values


def spec_columns(notifier: Notifier) -> dict[str, object]:
    """The stored columns a PATCH's result is checked against, as its kind's spec names
    them (see alerting.notifiers.Registry.check_merged)."""
    return {name: getattr(notifier, name) for name in SPEC_COLUMNS}
