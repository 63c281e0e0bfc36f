"""What a quality canary expects of its reply: a dataset line's `expect`. Checked on the
reply's text (or, for `json_schema`, on its first tool call's arguments when it called a
tool, else on the text as JSON) and on its output token count. Every check set must hold."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel
from sustain.probes.regex import PatternError, compiled

MAX_SCHEMA_BYTES = 64 * 1024


class Expect(InputModel):
    contains: list[str] | None = Field(
        default=None, min_length=1, max_length=32,
        description="Texts the reply must contain (each; a single text is one).")
    regex: str | None = Field(
        default=None, min_length=1, max_length=1000,
        description="An RE2 pattern the reply must contain a match of.")
    equals: str | None = Field(default=None, max_length=100_000,
                               description="The whole reply, leading and trailing space aside.")
    json_schema: dict[str, Any] | None = Field(
        default=None, description="A JSON Schema the reply's JSON (or its first tool call's "
        "arguments) must meet.")
    min_output_tokens: int | None = Field(default=None, ge=0, le=1_000_000)
    max_output_tokens: int | None = Field(default=None, ge=0, le=1_000_000)

    @field_validator("contains", mode="before")
    @classmethod
    def _one_text_is_a_list(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("contains")
    @classmethod
    def _texts(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not text or len(text) > 10_000 for text in value):
            raise PydanticCustomError("text", "each text must have 1 to 10000 characters")
        return value

    @field_validator("regex")
    @classmethod
    def _re2(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                compiled(value)
            except PatternError as exc:
                raise PydanticCustomError("regex", "{reason}", {"reason": str(exc)}) from None
        return value

    @field_validator("json_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        if len(json.dumps(value)) > MAX_SCHEMA_BYTES:
            raise PydanticCustomError("too_large", "at most {limit} bytes as JSON",
                                      {"limit": MAX_SCHEMA_BYTES})
        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as exc:
            raise PydanticCustomError("json_schema", "not a valid JSON Schema ({reason})",
                                      {"reason": exc.message[:200]}) from None
        return value

    @model_validator(mode="after")
    def _something(self) -> Expect:
        if all(getattr(self, name) is None for name in type(self).model_fields):
            raise PydanticCustomError("empty", "expect needs at least one check")
        low, high = self.min_output_tokens, self.max_output_tokens
        if low is not None and high is not None and low > high:
            raise PydanticCustomError("range", "min_output_tokens is above max_output_tokens")
        return self
