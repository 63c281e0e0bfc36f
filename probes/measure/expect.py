"""What a quality canary expects of its reply: a dataset line's `expect`. Checked on the
reply's text (or, for `json_schema`, on its first tool call's arguments when it called a
tool, else on the text as JSON) and on its output token count. Every check set must hold."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cached_property
from typing import Any

import jsonschema
from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel
from sustain.probes.regex import PatternError, compiled

MAX_SCHEMA_BYTES = 64 * 1024


def _keywords(schema: Any) -> Iterator[tuple[str, Any]]:
    """Every `pattern` (with its value) and `patternProperties` keyword in a schema, at any
    depth (a property *named* pattern is not a keyword)."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if (key == "pattern" and isinstance(value, str)) or key == "patternProperties":
                yield key, value
            if key in ("const", "enum", "default", "examples"):
                continue  # data, not schemas
            if key in ("properties", "$defs", "definitions", "dependentSchemas") \
                    and isinstance(value, dict):
                for sub in value.values():
                    yield from _keywords(sub)
            elif isinstance(value, dict | list):
                yield from _keywords(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _keywords(item)


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
        for keyword, pattern in _keywords(value):
            if keyword == "patternProperties":
                raise PydanticCustomError(
                    "json_schema", "patternProperties is not supported (its patterns would "
                    "run under Python's backtracking re); use properties")
            try:
                compiled(pattern)
            except PatternError as exc:
                raise PydanticCustomError("json_schema", "pattern {reason}",
                                          {"reason": str(exc)}) from None
        return value

    @cached_property
    def schema_key(self) -> str:
        """The schema as canonical JSON: the key its compiled validator is cached under."""
        return json.dumps(self.json_schema, sort_keys=True)

    @model_validator(mode="after")
    def _something(self) -> Expect:
        if all(getattr(self, name) is None for name in type(self).model_fields):
            raise PydanticCustomError("empty", "expect needs at least one check")
        low, high = self.min_output_tokens, self.max_output_tokens
        if low is not None and high is not None and low > high:
            raise PydanticCustomError("range", "min_output_tokens is above max_output_tokens")
        return self
