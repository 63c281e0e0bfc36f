"""/api/v1/endpoints: CRUD, validation naming fields, and no secret ever stored or returned."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.service.helpers import create_endpoint

PROBLEM = "application/problem+json"


async def test_endpoint_crud_round_trip(api: httpx.AsyncClient) -> None:
    created = await create_endpoint(api, "http://127.0.0.1:9/v1", labels={"team": "ml"},
                                    auth_secret_ref="env:TEST_OPENAI_API_KEY")
    assert created["api_kind"] == "openai-chat"
    assert created["auth_secret_ref"] == "env:TEST_OPENAI_API_KEY"
    listed = (await api.get("/api/v1/endpoints")).json()["items"]
    assert [e["name"] for e in listed] == ["sim"]
    r = await api.patch(f"/api/v1/endpoints/{created['id']}",
                        json={"model": "llama-3", "auth_secret_ref": None})
    assert r.status_code == 200, r.text
    assert r.json()["model"] == "llama-3"
    assert r.json()["auth_secret_ref"] is None
    assert r.json()["base_url"] == "http://127.0.0.1:9/v1"
    assert (await api.delete(f"/api/v1/endpoints/{created['id']}")).status_code == 204
    assert (await api.get(f"/api/v1/endpoints/{created['id']}")).status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"base_url": "127.0.0.1:8000/v1"}, "base_url"),
        ({"base_url": "ftp://host/v1"}, "base_url"),
        ({"api_kind": "grpc"}, "api_kind"),
        ({"timeout_total_s": -1}, "timeout_total_s"),
        ({"name": "has spaces"}, "name"),
        ({"auth_secret_ref": "sk-abc123"}, "auth_secret_ref"),
        ({"unknown_field": 1}, "unknown_field"),
        ({"model": "nul\u0000byte"}, "model"),
        ({"api_kind": "ftp"}, "api_kind"),
        ({"headers": {"x-team": "caf\u00e9"}}, "headers.x-team"),
        ({"headers": {"x-team": "a\r\nInjected: 1"}}, "headers.x-team"),
        ({"base_url": "http://user:pw@127.0.0.1:9/v1"}, "base_url"),
        ({"base_url": "http://127.0.0.1:9/v1?api_key=abc"}, "base_url"),
    ],
)
async def test_bad_field_answers_422_problem_naming_it(
        api: httpx.AsyncClient, body: dict[str, object], field: str) -> None:
    full = {"name": "ep", "base_url": "http://127.0.0.1:9/v1", "model": "m", **body}
    r = await api.post("/api/v1/endpoints", json=full)
    assert r.status_code == 422
    assert r.headers["content-type"] == PROBLEM
    problem = r.json()
    assert problem["status"] == 422
    assert field in [e["field"] for e in problem["errors"]]
    assert field in problem["detail"]


async def test_credential_headers_are_refused_and_never_echoed(api: httpx.AsyncClient) -> None:
    r = await api.post("/api/v1/endpoints", json={
        "name": "ep", "base_url": "http://127.0.0.1:9/v1", "model": "m",
        "headers": {"Authorization": "Bearer sk-very-secret"}})
    assert r.status_code == 422
    assert "auth_secret_ref" in r.text
    assert "sk-very-secret" not in r.text


async def test_credentials_in_the_url_are_refused_and_never_echoed(
        api: httpx.AsyncClient) -> None:
    for url in ("http://user:sk-in-url@127.0.0.1:9/v1", "http://127.0.0.1:9/v1?token=sk-in-url"):
        r = await api.post("/api/v1/endpoints",
                           json={"name": "ep", "base_url": url, "model": "m"})
        assert r.status_code == 422
        assert "sk-in-url" not in r.text


async def test_malformed_secret_reference_is_not_echoed(api: httpx.AsyncClient) -> None:
    r = await api.post("/api/v1/endpoints", json={
        "name": "ep", "base_url": "http://127.0.0.1:9/v1", "model": "m",
        "auth_secret_ref": "sk-live-0123456789"})
    assert r.status_code == 422
    assert "sk-live-0123456789" not in r.text


async def test_duplicate_name_is_409(api: httpx.AsyncClient) -> None:
    await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.post("/api/v1/endpoints",
                       json={"name": "sim", "base_url": "http://127.0.0.1:9/v1", "model": "m"})
    assert r.status_code == 409
    assert r.headers["content-type"] == PROBLEM
    assert "sim" in r.json()["detail"]


async def test_unknown_and_malformed_ids(api: httpx.AsyncClient) -> None:
    r = await api.get("/api/v1/endpoints/424242")
    assert r.status_code == 404
    assert r.headers["content-type"] == PROBLEM
    assert (await api.get("/api/v1/endpoints/abc")).status_code == 422
    assert (await api.get(f"/api/v1/endpoints/{2**70}")).status_code == 422
    assert (await api.patch("/api/v1/endpoints/424242", json={"model": "x"})).status_code == 404


async def test_patch_cannot_null_a_required_field(api: httpx.AsyncClient) -> None:
    created = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.patch(f"/api/v1/endpoints/{created['id']}", json={"model": None})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "model"


async def test_endpoint_in_use_cannot_be_deleted(api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.post("/api/v1/probes", json={
        "name": "p", "endpoint_id": endpoint["id"], "interval_s": 60})
    assert r.status_code == 201
    r = await api.delete(f"/api/v1/endpoints/{endpoint['id']}")
    assert r.status_code == 409


async def test_invalid_json_body_is_422(api: httpx.AsyncClient) -> None:
    r = await api.post("/api/v1/endpoints", content=b"{not json",
                       headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.headers["content-type"] == PROBLEM


async def test_http_endpoints_carry_their_check(api: httpx.AsyncClient) -> None:
    created = await create_endpoint(api, "http://127.0.0.1:9", api_kind="http", model="n/a",
                                    http_check={"path": "/health"})
    assert created["http_check"]["method"] == "GET"
    assert created["http_check"]["expected_status"] == 200
    assert created["http2"] is False
    r = await api.post("/api/v1/endpoints", json={
        "name": "chat", "base_url": "http://127.0.0.1:9/v1", "model": "m",
        "http_check": {"path": "/x"}})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "http_check"
    r = await api.post("/api/v1/endpoints", json={
        "name": "bad", "base_url": "http://127.0.0.1:9", "model": "m", "api_kind": "http",
        "http_check": {"method": "BREW"}})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "http_check.method"


@pytest.mark.parametrize("headers", [
    {"X-Auth-Token": "opaque-value-1"}, {"X-Goog-Api-Key": "opaque-value-1"},
    {"Ocp-Apim-Subscription-Key": "opaque-value-1"}, {"Private-Token": "opaque-value-1"},
    {"X-Amz-Security-Token": "opaque-value-1"}, {"X-Client-Secret": "opaque-value-1"},
    {"Cookie": "sid=opaque-value-1"}, {"X-Forwarded-User": "Bearer opaque-value-1"},
    {"X-Whatever": "basic opaque-value-1"},
])
async def test_credential_like_headers_are_refused_and_never_echoed(
        api: httpx.AsyncClient, headers: dict[str, str]) -> None:
    r = await api.post("/api/v1/endpoints", json={
        "name": "ep", "base_url": "http://127.0.0.1:9/v1", "model": "m", "headers": headers})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == "headers"
    assert "opaque-value-1" not in r.text
    assert (await api.get("/api/v1/endpoints")).json()["items"] == []


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:9/v1?code=opaque-value-1",
    "http://127.0.0.1:9/v1?X-Amz-Credential=opaque-value-1",
    "http://127.0.0.1:9/v1?sig=opaque-value-1",
    "http://127.0.0.1:9/v1?api%5Fkey=opaque-value-1",
    "http://127.0.0.1:9/v1#token=opaque-value-1",
])
async def test_credential_like_url_parts_are_refused_and_never_echoed(
        api: httpx.AsyncClient, url: str) -> None:
    r = await api.post("/api/v1/endpoints", json={"name": "ep", "base_url": url, "model": "m"})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == "base_url"
    assert "opaque-value-1" not in r.text


async def test_a_credential_in_an_http_check_path_is_refused(api: httpx.AsyncClient) -> None:
    r = await api.post("/api/v1/endpoints", json={
        "name": "ep", "base_url": "http://127.0.0.1:9", "model": "m", "api_kind": "http",
        "http_check": {"path": "/health?access_token=opaque-value-1"}})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == "http_check"
    assert "opaque-value-1" not in r.text


async def test_ordinary_headers_and_parameters_are_kept(api: httpx.AsyncClient) -> None:
    r = await api.post("/api/v1/endpoints", json={
        "name": "ep", "base_url": "http://127.0.0.1:9/v1?api-version=2024-10-21",
        "model": "m", "headers": {"X-Team": "research", "X-Request-Source": "sustain"}})
    assert r.status_code == 201, r.text
    assert r.json()["headers"] == {"X-Team": "research", "X-Request-Source": "sustain"}
