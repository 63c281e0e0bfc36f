"""The one JSON encoder for everything sustain writes: stored JSON (a run's summary), API
responses and `--json` output.

JSON has no number for NaN or an infinity. Python's `json` writes the tokens `NaN` and
`Infinity` anyway, which PostgreSQL, `jq` and every strict parser refuse; pydantic's own JSON
output turns them into `null` silently, hiding the figure that went wrong. This encoder
refuses them instead, naming where the value was (`summary.steady_state.cov_tpot_p90`), so a
figure that is undefined must be written as `null` with its reason by the code that computes
it, and a new figure cannot bring a non-finite number back unnoticed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from starlette.responses import JSONResponse

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class NonFiniteNumberError(ValueError):
    """A NaN or an infinity among the values to encode."""

    def __init__(self, path: str, value: float) -> None:
        super().__init__(f"{path or 'the value'} is {value!r}: JSON has no such number")
        self.path = path
        """Where the value is: keys and list indexes joined by dots, e.g. `stages.2.cov`."""
        self.value = value


def non_finite(value: Any, path: str = "") -> Iterator[tuple[str, float]]:
    """Every NaN or infinity in `value` (dicts, lists, tuples, floats), with its path."""
    if isinstance(value, float):
        if not math.isfinite(value):
            yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from non_finite(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from non_finite(item, f"{path}.{index}" if path else str(index))


def dumps(value: Any) -> str:
    """`value` as compact JSON (UTF-8 text, not ASCII-escaped). Raises NonFiniteNumberError
    for a NaN or infinity anywhere in it, TypeError for a value JSON cannot hold."""
    try:
        return _ENCODER.encode(value)
    except ValueError as exc:
        found = next(non_finite(value), None)
        if found is None:  # a ValueError of another kind (a circular reference)
            raise
        raise NonFiniteNumberError(*found) from exc


def dumps_bytes(value: Any) -> bytes:
    return dumps(value).encode()


class StrictJSONResponse(JSONResponse):
    """An API response through `dumps`: a non-finite figure fails the request (the error
    handlers answer 500 and log where it was) instead of reaching a client as `NaN`, or
    silently as `null`."""

    def render(self, content: Any) -> bytes:
        return dumps_bytes(content)
