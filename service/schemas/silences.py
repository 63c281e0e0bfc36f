"""Silence bodies: label matchers (Alertmanager's shape), a time range and a comment."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel
from sustain.service.evaluation.patterns import PatternError, anchored
from sustain.service.schemas.common import (
    MAX_DESCRIPTION_CHARS,
    MAX_LABELS,
    LabelKey,
    LabelValue,
    Text,
    supported_time,
)


class MatcherBody(InputModel):
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
    matchers: list[MatcherBody] = Field(min_length=1, max_length=MAX_LABELS)
    starts_at: datetime | None = Field(default=None, strict=False, description="Default: now.")
    ends_at: datetime = Field(strict=False, description="RFC 3339 with a time zone.")
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
