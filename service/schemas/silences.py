"""Silence bodies: label matchers (Alertmanager's shape), a time range and a comment."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel
from sustain.service.evaluation.patterns import PatternError, anchored
from sustain.service.schemas.common import (
    EARLIEST,
    LATEST,
    MAX_DESCRIPTION_CHARS,
    MAX_LABELS,
    LabelKey,
    LabelValue,
    Text,
    supported_time,
)
from sustain.service.schemas.patterns import zoned_time

VALID_REGEX: JsonDict = {"anyOf": [
    {"properties": {"is_regex": {"const": False}}},
    {"required": ["is_regex"],
     "properties": {"is_regex": {"const": True}, "value": {"format": "regex"}}}]}
"""A regex matcher's value is a regular expression (RE2, anchored at both ends)."""
SELECTS_POSITIVELY: JsonDict = {"contains": {
    "properties": {"is_equal": {"const": True}},
    "anyOf": [{"required": ["is_regex"], "properties": {"is_regex": {"const": True}}},
              {"properties": {"value": {"minLength": 1}}}]}}
"""At least one matcher is an equality (is_equal, the default) that is a regex or has a
value: a silence that selects nothing positively would match every alert."""
ZONED_TIME = zoned_time(EARLIEST.year, LATEST.year)
"""An RFC 3339 time with its offset, in the supported years."""
FUTURE = "x-sustain-future"
"""Marks a time that must be in the future: the served document narrows its years to those
from the one it was built in (service/api/openapi.py)."""


class MatcherBody(InputModel):
    model_config = ConfigDict(json_schema_extra=VALID_REGEX)

    name: LabelKey
    value: LabelValue
    is_regex: bool = False
    is_equal: bool = True

    @model_validator(mode="after")
    def _regex(self) -> MatcherBody:
        if self.is_regex:
            try:
                anchored(self.value)
            except PatternError as exc:
                raise PydanticCustomError("regex", "value {reason}",
                                          {"field": "value", "reason": str(exc)}) from None
        return self


class SilenceCreate(InputModel):
    matchers: list[MatcherBody] = Field(
        min_length=1, max_length=MAX_LABELS, json_schema_extra=SELECTS_POSITIVELY,
        description="At least one is an equality (is_equal) that is a regex or has a value.")
    starts_at: datetime | None = Field(
        default=None, strict=False, json_schema_extra={"pattern": ZONED_TIME},
        description="RFC 3339 with a time zone, before ends_at. Default: now.")
    ends_at: datetime = Field(
        strict=False, json_schema_extra={"pattern": ZONED_TIME, FUTURE: True},
        description="RFC 3339 with a time zone, after starts_at and in the future.")
    comment: Text = Field(min_length=1, max_length=MAX_DESCRIPTION_CHARS)
    created_by: Text | None = Field(
        default=None, min_length=1, max_length=200,
        description="Who asked for it (free text, as in Alertmanager); default: the key's name.")

    @field_validator("starts_at", "ends_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("must carry a time zone (e.g. 2026-12-03T10:00:00Z)")
        return supported_time(value)

    @model_validator(mode="after")
    def _matches_something(self) -> SilenceCreate:
        if all(not m.is_equal or (not m.is_regex and m.value == "") for m in self.matchers):
            raise ValueError("at least one matcher must select alerts positively (a "
                             "silence must not match everything)")
        return self


class SilenceRead(BaseModel):
    id: int
    matchers: list[MatcherBody]
    starts_at: datetime
    ends_at: datetime
    comment: str
    created_by: str
    created_at: datetime
    state: str = Field(description="pending, active or expired.")
