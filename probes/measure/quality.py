"""Scoring a quality canary: does the reply meet its `expect`? Pure and bounded: RE2 matches
in time linear in the reply, a schema is compiled once per expectation, and a reply is
already bounded (measure/reply.py). It runs after the request's measurement is complete."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import jsonschema
from pydantic import BaseModel

from sustain.probes.measure.reply import Reply
from sustain.probes.regex import compiled
from sustain.probes.workload.expect import Expect


class QualityCounts(BaseModel):
    checked: int
    """Successful requests whose reply was checked against its `expect`."""
    passed: int

    @property
    def ratio(self) -> float | None:
        return self.passed / self.checked if self.checked else None


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    validator: jsonschema.protocols.Validator = jsonschema.Draft202012Validator(
        json.loads(schema_json))
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
        schema = json.dumps(expect.json_schema, sort_keys=True)
        if not _validator(schema).is_valid(document):
            return False
    return True
