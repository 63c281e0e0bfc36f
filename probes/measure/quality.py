"""Scoring a quality canary: does the reply meet its `expect`? Pure and bounded: RE2 matches
in time linear in the reply (a schema's `pattern` too), a schema is compiled once per
expectation, and a reply is already bounded (measure/reply.py). It runs after the request's
measurement is complete."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import jsonschema
from pydantic import BaseModel

from sustain.probes.measure.expect import Expect
from sustain.probes.measure.reply import Reply
from sustain.probes.regex import compiled


class QualityCounts(BaseModel):
    checked: int
    """Successful requests whose reply was checked against its `expect`."""
    passed: int

    @property
    def ratio(self) -> float | None:
        return self.passed / self.checked if self.checked else None


def _re2_pattern(validator: Any, pattern: str, instance: Any, _schema: Any
                 ) -> Iterator[jsonschema.ValidationError]:
    """JSON Schema's `pattern`, matched by RE2 (linear time) instead of Python's `re`: a
    schema's pattern meets the endpoint's reply, which may be long."""
    if validator.is_type(instance, "string") and compiled(pattern).search(instance) is None:
        yield jsonschema.ValidationError(f"does not match the pattern {pattern!r}")


Re2Validator: Any = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    jsonschema.Draft202012Validator, {"pattern": _re2_pattern})
"""Draft 2020-12 with `pattern` under RE2 (`patternProperties` is refused at parse time)."""


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    validator: jsonschema.protocols.Validator = Re2Validator(json.loads(schema_json))
    return validator


def _json_of(reply: Reply) -> Any:
    """The JSON a schema is checked on: the first tool call's arguments, else the text (a
    ```json fence around it is allowed). ValueError when it is not JSON."""
    if reply.tool_calls:
        return json.loads(reply.tool_calls[0].arguments)
    text = reply.text.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    return json.loads(text)


def meets(expect: Expect, reply: Reply, output_tokens: int) -> bool:
    """Whether the reply meets every check `expect` sets."""
    text = reply.text
    if expect.min_output_tokens is not None and output_tokens < expect.min_output_tokens:
        return False
    if expect.max_output_tokens is not None and output_tokens > expect.max_output_tokens:
        return False
    if expect.contains is not None and not all(part in text for part in expect.contains):
        return False
    if expect.equals is not None and text.strip() != expect.equals.strip():
        return False
    if expect.regex is not None and compiled(expect.regex).search(text) is None:
        return False
    if expect.json_schema is not None:
        try:
            document = _json_of(reply)
        except (ValueError, RecursionError):
            return False
        if not _validator(expect.schema_key).is_valid(document):
            return False
    return True
