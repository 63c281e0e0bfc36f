"""The base of every model a caller fills in (REST bodies, config files, the one-shot CLI):
what it accepts can be stored in PostgreSQL and sent as JSON unchanged.

Pydantic's lax mode would turn `true` into 1 and `"5"` into 5, and would take NaN and Infinity
for floats; PostgreSQL cannot store NUL in text or jsonb; and a free-form value such as a
workload's `extra_body` may hold numbers that JSON parsers at either end read differently
(1e308, 2**64). So an InputModel is strict (a number is a JSON number, though a JSON integer is
still a valid float), its floats are finite, and every value of every field, free-form JSON
included, is checked by `storable_problem`. A refusal is a validation error on the field that
holds the bad value, with where inside it in the message.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic_core import PydanticCustomError

MAX_JSON_NUMBER = 2**63 - 1
"""Free-form numbers must lie within +-MAX_JSON_NUMBER (the range of a 64-bit integer)."""
MAX_JSON_DEPTH = 32
"""Free-form JSON may nest at most this deep."""


def _where(path: tuple[str | int, ...]) -> str:
    return "" if not path else " (at " + "".join(f"[{p!r}]" for p in path) + ")"


def _scalar_problem(value: object) -> str | None:
    if isinstance(value, str):
        return "must not contain NUL characters" if "\x00" in value else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if abs(value) <= MAX_JSON_NUMBER else \
            f"numbers must lie within +-{MAX_JSON_NUMBER}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "NaN and infinite numbers cannot be stored"
        return None if abs(value) <= MAX_JSON_NUMBER else \
            f"numbers must lie within +-{MAX_JSON_NUMBER}"
    return None


def storable_problem(value: object) -> str | None:
    """Why `value` cannot be stored and sent as JSON, naming where inside it; None if it can.

    Walks dicts (keys and values), lists and tuples without recursion, so a deeply nested value
    costs no stack; models inside are left to their own validation."""
    stack: list[tuple[object, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, BaseModel):
            continue
        if isinstance(item, dict | list | tuple):
            if len(path) >= MAX_JSON_DEPTH:
                return f"nested deeper than {MAX_JSON_DEPTH} levels{_where(path)}"
            if isinstance(item, dict):
                for key, child in item.items():
                    problem = _scalar_problem(key)
                    if problem is not None:
                        return f"key {problem}{_where(path)}"
                    stack.append((child, (*path, key)))
            else:
                stack.extend((child, (*path, i)) for i, child in enumerate(item))
            continue
        problem = _scalar_problem(item)
        if problem is not None:
            return problem + _where(path)
    return None


class InputModel(BaseModel):
    """Strict, finite, storable: see the module's docstring. Subclasses add to model_config."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        problem = storable_problem(value)
        if problem is not None:
            raise PydanticCustomError("not_storable", "{problem}", {"problem": problem})
        return value
