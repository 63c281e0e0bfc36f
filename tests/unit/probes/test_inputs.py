"""Input models accept only what can be stored in PostgreSQL and sent as JSON: numbers that are
numbers, finite and within 64 bits, strings without NUL, free-form JSON of bounded depth."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field, ValidationError

from sustain.probes.inputs import MAX_JSON_DEPTH, InputModel, storable_problem


class Body(InputModel):
    count: int = 0
    ratio: float = 0.0
    name: str = ""
    free: dict[str, Any] = Field(default_factory=dict)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value", [
    {"a": [1, 2.5, "x", None, True, {"b": -(2**63) + 1}]}, 2**63 - 1, -9.2e18, "",
    nested(MAX_JSON_DEPTH),
])
def test_json_that_postgres_and_parsers_agree_on_is_storable(value: object) -> None:
    assert storable_problem(value) is None


@pytest.mark.parametrize(("value", "expected"), [
    ("a\x00b", "must not contain NUL characters"),
    ({"k": ["ok", "a\x00"]}, "must not contain NUL characters (at ['k'][1])"),
    ({"k\x00": 1}, "key must not contain NUL characters"),
    ({"t": float("nan")}, "NaN and infinite numbers cannot be stored (at ['t'])"),
    ([float("-inf")], "NaN and infinite numbers cannot be stored (at [0])"),
    ({"t": 1e308}, "numbers must lie within"),
    ({"n": 2**64}, "numbers must lie within"),
    ({"n": -(2**63) - 1}, "numbers must lie within"),
    (nested(MAX_JSON_DEPTH + 1), f"nested deeper than {MAX_JSON_DEPTH} levels"),
])
def test_what_cannot_be_stored_is_named_with_where_it_is(value: object, expected: str) -> None:
    problem = storable_problem(value)
    assert problem is not None
    assert problem.startswith(expected)


def test_a_very_deep_value_costs_no_stack() -> None:
    assert storable_problem(nested(100_000)) is not None


@pytest.mark.parametrize(("raw", "field"), [
    ({"count": True}, "count"),
    ({"count": "5"}, "count"),
    ({"count": 5.0}, "count"),
    ({"ratio": False}, "ratio"),
    ({"ratio": "0.5"}, "ratio"),
    ({"ratio": float("nan")}, "ratio"),
    ({"ratio": float("inf")}, "ratio"),
    ({"name": "a\x00"}, "name"),
    ({"free": {"x": float("nan")}}, "free"),
    ({"free": {"x": 10**30}}, "free"),
    ({"unknown": 1}, "unknown"),
])
def test_an_input_model_refuses_the_field_that_holds_a_bad_value(raw: dict[str, object],
                                                                   field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Body.model_validate(raw)
    assert [e["loc"] for e in caught.value.errors()] == [(field,)]


def test_a_json_integer_is_a_valid_float() -> None:
    assert Body.model_validate({"ratio": 2, "count": 3}).ratio == 2.0
