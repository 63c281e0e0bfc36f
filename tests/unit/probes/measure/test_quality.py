"""Scoring quality canaries (probes/measure/quality.py, probes/measure/expect.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from sustain.probes.measure.expect import Expect
from sustain.probes.measure.quality import meets
from sustain.probes.measure.reply import Reply, ToolCall


def check(expect: dict[str, Any], text: str = "", tokens: int = 5,
          calls: tuple[ToolCall, ...] = ()) -> bool:
    return meets(Expect.model_validate(expect), Reply(text, calls), tokens)


def test_contains_needs_every_text_and_one_text_is_a_list() -> None:
    assert check({"contains": "Paris"}, "The capital is Paris.")
    assert check({"contains": ["capital", "Paris"]}, "The capital is Paris.")
    assert not check({"contains": ["capital", "Lyon"]}, "The capital is Paris.")


def test_equals_ignores_surrounding_space_only() -> None:
    assert check({"equals": "42"}, " 42\n")
    assert not check({"equals": "42"}, "42.")


def test_regex_is_searched_with_re2_in_linear_time() -> None:
    assert check({"regex": r"\b\d{4}-\d{2}-\d{2}\b"}, "due 2026-12-04, ok")
    assert not check({"regex": r"^\d+$"}, "12a")
    assert not check({"regex": "(a+)+$"}, "a" * 100_000 + "b")  # no backtracking blow-up


def test_a_json_schema_checks_tool_arguments_or_the_text_as_json() -> None:
    schema = {"type": "object", "required": ["city"],
              "properties": {"city": {"type": "string"}}}
    call = (ToolCall("c", "weather", '{"city": "Oslo"}'),)
    assert check({"json_schema": schema}, calls=call)
    assert not check({"json_schema": schema}, calls=(ToolCall("c", "weather", "{}"),))
    assert check({"json_schema": schema}, '```json\n{"city": "Rome"}\n```')
    assert not check({"json_schema": schema}, "Rome")


def test_output_token_bounds() -> None:
    assert check({"min_output_tokens": 3, "max_output_tokens": 5}, "x", tokens=4)
    assert not check({"min_output_tokens": 3}, "x", tokens=2)
    assert not check({"max_output_tokens": 3}, "x", tokens=4)


@pytest.mark.parametrize("expect", [
    {}, {"regex": "(unclosed"}, {"json_schema": {"type": "nonsense"}},
    {"min_output_tokens": 5, "max_output_tokens": 2}, {"contains": [""]}, {"colour": "red"},
])
def test_an_expectation_that_cannot_be_checked_is_refused(expect: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Expect.model_validate(expect)


def test_a_schema_pattern_is_matched_by_re2_and_pattern_properties_are_refused() -> None:
    schema = {"type": "object", "properties": {
        "pattern": {"type": "string", "pattern": "(a+)+$"}}}  # a property named pattern
    long = "a" * 200_000 + "!"
    assert not check({"json_schema": schema}, calls=(ToolCall("c", "f", json.dumps(
        {"pattern": long})),))  # RE2: linear, however long the reply
    assert check({"json_schema": schema}, calls=(ToolCall("c", "f", '{"pattern": "aaa"}'),))
    with pytest.raises(ValidationError, match="patternProperties"):
        Expect.model_validate({"json_schema": {"patternProperties": {"^x": {}}}})
    with pytest.raises(ValidationError, match="RE2"):
        Expect.model_validate({"json_schema": {"type": "string", "pattern": "(?<=x)y"}})
