"""REST bodies hold only what PostgreSQL and JSON can: booleans are not numbers, NaN,
infinite and huge numbers are refused in typed fields and in free-form JSON (extra_body), and
NUL is refused in every string. Each is a 422 naming the field, and nothing is stored."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.integration.service.helpers import create_endpoint, create_probe

LATER = (datetime.now(UTC) + timedelta(days=1)).isoformat()


async def post_raw(api: httpx.AsyncClient, path: str, body: dict[str, Any]) -> httpx.Response:
    """POST `body` as written by Python's json (NaN and Infinity as bare words, as some
    clients send them)."""
    return await api.post(path, content=json.dumps(body),
                          headers={"Content-Type": "application/json"})


def fields_of(r: httpx.Response) -> list[str]:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    return [e["field"] for e in r.json()["errors"]]


@pytest.mark.parametrize(("body", "field"), [
    ({"interval_s": True}, "interval_s"),
    ({"jitter_s": False}, "jitter_s"),
    ({"interval_s": "60"}, "interval_s"),
    ({"profile": {"kind": "constant", "rate": True, "duration_s": 5}}, "profile.rate"),
    ({"profile": {"kind": "sweep", "levels": [1, True], "duration_s": 5}}, "profile.levels.1"),
    ({"workload": {"max_tokens": True}}, "workload.max_tokens"),
    ({"workload": {"input_length": {"kind": "fixed", "tokens": True}}},
     "workload.input_length.fixed.tokens"),
    ({"slo": {"ttft_ms": True}}, "slo.ttft_ms"),
])
async def test_a_boolean_where_a_number_belongs_is_422_naming_the_field(
        api: httpx.AsyncClient, body: dict[str, Any], field: str) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.post("/api/v1/probes", json={"name": "p", "endpoint_id": endpoint["id"],
                                               "interval_s": 60, **body})
    assert field in fields_of(r)
    assert (await api.get("/api/v1/probes")).json()["items"] == []


async def test_a_json_integer_still_fills_a_float_field(api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1", timeout_total_s=60)
    probe = await create_probe(api, endpoint["id"], jitter_s=1,
                               profile={"kind": "constant", "rate": 2, "duration_s": 1})
    assert (endpoint["timeout_total_s"], probe["jitter_s"]) == (60.0, 1.0)
    assert probe["profile"]["rate"] == 2.0


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/api/v1/endpoints", {"name": "e", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                           "timeout_total_s": True}, "timeout_total_s"),
    ("/api/v1/endpoints", {"name": "e", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                           "tls_verify": 1}, "tls_verify"),
    ("/api/v1/slos", {"name": "s", "probes": ["p"], "sli": {"kind": "availability"},
                      "objective": True}, "objective"),
    ("/api/v1/notifiers", {"name": "n", "kind": "webhook", "url": "http://127.0.0.1:9/",
                           "timeout_s": True}, "timeout_s"),
])
async def test_booleans_are_not_numbers_in_any_body(
        api: httpx.AsyncClient, path: str, body: dict[str, Any], field: str) -> None:
    assert field in fields_of(await api.post(path, json=body))
    assert (await api.get(path)).json()["items"] == []


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 1e308, 2**64,
                                   {"deep": [1, {"x": float("nan")}]}])
async def test_numbers_json_cannot_carry_in_extra_body_are_422_naming_it(
        api: httpx.AsyncClient, value: object) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await post_raw(api, "/api/v1/probes", {
        "name": "p", "endpoint_id": endpoint["id"], "interval_s": 60,
        "workload": {"extra_body": {"min_tokens": value}}})
    assert fields_of(r) == ["workload.extra_body"]
    assert (await api.get("/api/v1/probes")).json()["items"] == []


async def test_nan_in_a_typed_float_is_422_naming_it(api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await post_raw(api, "/api/v1/probes", {
        "name": "p", "endpoint_id": endpoint["id"], "interval_s": 60,
        "profile": {"kind": "sweep", "levels": [1], "duration_s": 1,
                    "max_ttft_p99_ms": float("inf")}})
    assert "profile.max_ttft_p99_ms" in fields_of(r)


@pytest.mark.parametrize(("change", "field"), [
    ({"name": "p\x00"}, "name"),
    ({"labels": {"team": "a\x00b"}}, "labels.team"),
    ({"workload": {"prompt": "hi\x00"}}, "workload.prompt"),
    ({"workload": {"extra_body": {"stop": ["\x00"]}}}, "workload.extra_body"),
    ({"workload": {"extra_body": {"k\x00": 1}}}, "workload.extra_body"),
])
async def test_nul_in_any_probe_string_is_422_naming_the_field(
        api: httpx.AsyncClient, change: dict[str, Any], field: str) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.post("/api/v1/probes", json={
        "name": "p", "endpoint_id": endpoint["id"], "interval_s": 60, **change})
    assert field in fields_of(r)
    assert (await api.get("/api/v1/probes")).json()["items"] == []


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/api/v1/endpoints", {"name": "e", "base_url": "http://127.0.0.1:9/v1",
                           "model": "m\x00"}, "model"),
    ("/api/v1/endpoints", {"name": "e", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                           "headers": {"X-Team": "a\x00"}}, "headers.X-Team"),
    ("/api/v1/endpoints", {"name": "e", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                           "api_kind": "http", "http_check": {"body": "x\x00"}},
     "http_check.body"),
    ("/api/v1/slos", {"name": "s", "description": "d\x00", "probe_labels": {"a": "b"},
                      "sli": {"kind": "availability"}, "objective": 0.9}, "description"),
    ("/api/v1/silences", {"matchers": [{"name": "probe", "value": "p"}], "ends_at": LATER,
                          "comment": "c\x00", "created_by": "me"}, "comment"),
])
async def test_nul_in_any_string_of_any_body_is_422_naming_the_field(
        api: httpx.AsyncClient, path: str, body: dict[str, Any], field: str) -> None:
    assert field in fields_of(await api.post(path, json=body))
    assert (await api.get(path)).json()["items"] == []


async def test_nul_in_a_patch_is_refused_and_the_probe_is_unchanged(
        api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    probe = await create_probe(api, endpoint["id"])
    r = await api.patch(f"/api/v1/probes/{probe['id']}",
                        json={"workload": {"extra_body": {"user": "x\x00"}}})
    assert fields_of(r) == ["workload.extra_body"]
    assert (await api.get(f"/api/v1/probes/{probe['id']}")).json()["workload"] == \
        probe["workload"]
