"""The one JSON encoder refuses what JSON cannot hold, and says where it was."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel

from sustain.service.strict_json import NonFiniteNumberError, StrictJSONResponse, dumps


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_a_non_finite_number_is_refused_with_its_path(bad: float) -> None:
    value = {"summary": {"stages": [{"cov": 0.1}, {"cov": bad}]}}
    with pytest.raises(NonFiniteNumberError) as caught:
        dumps(value)
    assert caught.value.path == "summary.stages.1.cov"
    assert "summary.stages.1.cov" in str(caught.value)


def test_finite_values_encode_as_strict_json() -> None:
    value = {"a": [1, 2.5, None, True, "é"], "b": {"c": 1e308, "d": -0.0}}
    text = dumps(value)
    assert json.loads(text, parse_constant=pytest.fail) == value


def test_a_value_json_cannot_hold_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        dumps({"a": object()})


def test_a_nan_at_the_top_level_is_refused() -> None:
    with pytest.raises(NonFiniteNumberError, match="the value is nan"):
        dumps(math.nan)


class Figure(BaseModel):
    value: float | None


def _app() -> FastAPI:
    from sustain.service.app import create_app
    from sustain.service.config import Settings

    return create_app(Settings(), "postgresql://127.0.0.1:9/unused")


def test_every_json_api_route_answers_through_the_strict_encoder() -> None:
    """FastAPI's own fast path would write a NaN as null; every JSON route of the app takes
    the strict response class instead (the HTML pages and /metrics have their own)."""
    routes: list[Any] = []
    for route in _app().router.routes:
        if isinstance(route, APIRoute):
            routes.append(route)
        else:  # routers included lazily: their effective routes, with what they inherit
            routes += getattr(route, "effective_route_contexts", list)()
    json_routes = [r for r in routes if r.path.startswith("/api/") or r.path in
                   ("/healthz", "/readyz")]
    assert len(json_routes) > 30
    lax = [r.path for r in json_routes if r.response_class is not StrictJSONResponse]
    assert lax == []


def test_a_strict_response_refuses_a_non_finite_figure() -> None:
    with pytest.raises(NonFiniteNumberError):
        StrictJSONResponse(Figure(value=math.inf).model_dump(mode="json"))
    assert StrictJSONResponse(Figure(value=None).model_dump(mode="json")).body == \
        b'{"value":null}'
