"""Notifier bodies common to every kind (the fields all share, a PATCH, what is read back) and
the delivery log."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, model_validator
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel
from sustain.service.schemas.common import Labels, Name, Url, patch_schema, reject_nulls
from sustain.service.schemas.endpoints import SecretRef, check_url_has_no_credentials

DeliveryState = Literal["pending", "delivered", "failed", "silenced", "skipped"]


def _check_url(url: AnyHttpUrl | None) -> AnyHttpUrl | None:
    try:
        return check_url_has_no_credentials(url)
    except ValueError as exc:
        raise PydanticCustomError(
            "url_credentials", str(exc).replace("auth_secret_ref", "url_secret_ref"),
            {"field": "url"}) from None


ONE_URL: JsonDict = {"oneOf": [
    {"required": ["url"], "properties": {"url": {"type": "string"}}},
    {"required": ["url_secret_ref"], "properties": {"url_secret_ref": {"type": "string"}}}]}
"""Exactly one of url and url_secret_ref (a null one is not given)."""


def _spec_schema(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """What a kind's body must hold beyond its fields: ONE_URL, and no `url` for a kind whose
    URL is a secret (`URL_ONLY_AS_SECRET`)."""
    schema.update(ONE_URL)
    if getattr(model, "URL_ONLY_AS_SECRET", False):
        schema.setdefault("properties", {})["url"] = {
            "type": "null", "description": "Not for this kind: its URL is a credential, given "
            "as url_secret_ref."}


class NotifierSpec(InputModel):
    """What every kind of notifier is configured with; each kind's own model (one per module
    of sustain.service.alerting.notifiers) narrows `kind` to its name and adds its own fields
    and rules. The kinds are not listed here: they come from that package's registry."""

    model_config = ConfigDict(json_schema_extra=_spec_schema)
    URL_ONLY_AS_SECRET: ClassVar[bool] = False
    """A kind whose URL is itself a credential (Slack's) sets this, and refuses `url` in its
    own validator; the OpenAPI document says so."""

    name: Name
    kind: str
    url: Url | None = Field(
        default=None, description="Webhook URL, or an Alertmanager's root URL.")
    url_secret_ref: SecretRef | None = Field(
        default=None, description="env:NAME or file:/path holding the URL (required for "
        "Slack, whose URLs are secrets).")
    match: Labels = Field(default_factory=dict,
                          description="Only alerts whose labels include all of these.")
    send_resolved: bool = True
    enabled: bool = True
    timeout_s: float = Field(default=10.0, gt=0, le=30,
                             description="Seconds per HTTP try (3 quick tries per attempt).")

    @model_validator(mode="after")
    def _one_url(self) -> NotifierSpec:
        _check_url(self.url)
        if (self.url is None) == (self.url_secret_ref is None):
            raise PydanticCustomError("one_url", "give exactly one of url and url_secret_ref",
                                      {"field": "url"})
        return self


class NotifierUpdate(InputModel):
    """PATCH body: only the fields given change; kind cannot change. What the change leaves
    is checked against the notifier's kind by the registry (check_merged): exactly one of
    url and url_secret_ref, no url for a Slack notifier, signing_secret_ref for webhooks
    only."""

    model_config = ConfigDict(json_schema_extra=patch_schema(
        frozenset({"url", "url_secret_ref", "signing_secret_ref"})))

    name: Name | None = None
    kind: None = None
    url: Url | None = None
    url_secret_ref: SecretRef | None = None
    signing_secret_ref: SecretRef | None = None
    match: Labels | None = None
    send_resolved: bool | None = None
    enabled: bool | None = None
    timeout_s: float | None = Field(default=None, gt=0, le=30)

    @model_validator(mode="after")
    def _nulls(self) -> NotifierUpdate:
        _check_url(self.url)
        reject_nulls(self, frozenset({"url", "url_secret_ref", "signing_secret_ref"}))
        return self


class NotifierRead(BaseModel):
    id: int
    name: str
    kind: str
    url: str | None = Field(description="null when the URL is a secret reference.")
    url_secret_ref: str | None
    signing_secret_ref: str | None
    match: dict[str, str]
    send_resolved: bool
    enabled: bool
    timeout_s: float
    managed_by: str | None
    created_at: datetime
    updated_at: datetime


class DeliveryRead(BaseModel):
    id: int
    notification_id: int
    notifier_id: int
    fingerprint: str
    transition: str
    state: str
    attempts: int
    next_attempt_at: datetime
    last_status: int | None
    last_error: str | None
    created_at: datetime
    finished_at: datetime | None
