"""Notifier rows: the one mapping between the notifier schemas and their columns, used by the
REST routes and the config-file sync alike."""

from __future__ import annotations

from sustain.service.db.models import Notifier
from sustain.service.errors import FieldError
from sustain.service.schemas.notifiers import NotifierCreate, NotifierRead, NotifierUpdate


def read(notifier: Notifier) -> NotifierRead:
    """What the API answers for a stored notifier (secrets stay references)."""
    return NotifierRead.model_validate(notifier, from_attributes=True)


def columns(body: NotifierCreate | NotifierUpdate, *, partial: bool = False
            ) -> dict[str, object]:
    """Column values of a body: every field, or (partial) only those the caller set."""
    values = body.model_dump(mode="json", exclude_unset=partial)
    if values.get("kind") is None:
        values.pop("kind", None)
    return values


def url_columns(notifier: Notifier) -> dict[str, object]:
    """The stored columns a PATCH is checked against (see check_merged)."""
    return {"url": notifier.url, "url_secret_ref": notifier.url_secret_ref,
            "signing_secret_ref": notifier.signing_secret_ref}


def check_merged(kind: str, values: dict[str, object]) -> None:
    """What a PATCH leaves must still be a valid notifier of its kind."""
    if (values["url"] is None) == (values["url_secret_ref"] is None):
        raise FieldError("url", "give exactly one of url and url_secret_ref")
    if kind == "slack" and values["url"] is not None:
        raise FieldError("url", "a Slack webhook URL is a secret: give url_secret_ref")
    if kind != "webhook" and values["signing_secret_ref"] is not None:
        raise FieldError("signing_secret_ref", "belongs to webhook notifiers only")
