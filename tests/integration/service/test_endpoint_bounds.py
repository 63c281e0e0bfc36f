"""What a caller may store in an endpoint (and its neighbours) is bounded, and headers the
HTTP client sets itself are refused: each a 422 naming the field, nothing stored."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sustain.probes.client.target import CLIENT_HEADERS
from sustain.service.schemas.common import (
    MAX_HEADER_BYTES,
    MAX_HEADERS,
    MAX_LABEL_KEY_CHARS,
    MAX_LABEL_VALUE_CHARS,
    MAX_LABELS,
    MAX_NAME_CHARS,
    MAX_URL_CHARS,
)
from tests.integration.service.helpers import create_endpoint
from tests.integration.service.test_reach import refused


def endpoint(**fields: Any) -> dict[str, Any]:
    return {"name": "e", "base_url": "http://127.0.0.1:9/v1", "model": "m", **fields}


async def listed(api: httpx.AsyncClient, path: str) -> list[Any]:
    """The items a list answers (a plain list, or a page's `items`)."""
    body = (await api.get(path)).json()
    return list(body["items"] if isinstance(body, dict) else body)


async def nothing_stored(api: httpx.AsyncClient) -> None:
    assert await listed(api, "/api/v1/endpoints") == []


@pytest.mark.parametrize("header", [*sorted(CLIENT_HEADERS), "Content-Length", "HOST",
                                    "Transfer-Encoding", "Proxy-Connection"])
async def test_a_header_the_http_client_sets_is_refused_naming_it(
        api: httpx.AsyncClient, header: str) -> None:
    message = refused(await api.post("/api/v1/endpoints", json=endpoint(
        headers={"X-Tenant": "a", header: "5"})), f"headers.{header}")
    assert "set by the HTTP client itself" in message
    await nothing_stored(api)


async def test_every_client_header_given_is_named_and_a_patch_is_refused_too(
        api: httpx.AsyncClient) -> None:
    message = refused(await api.post("/api/v1/endpoints", json=endpoint(headers={
        "Content-Length": "5", "Transfer-Encoding": "chunked"})), "headers.Content-Length")
    assert message.startswith("Content-Length, Transfer-Encoding: ")
    created = await create_endpoint(api, "http://127.0.0.1:9/v1", headers={"X-Tenant": "a"})
    refused(await api.patch(f"/api/v1/endpoints/{created['id']}",
                            json={"headers": {"Connection": "close"}}), "headers.Connection")
    stored = (await api.get(f"/api/v1/endpoints/{created['id']}")).json()
    assert stored["headers"] == {"X-Tenant": "a"}


async def test_more_headers_than_the_bound_are_refused(api: httpx.AsyncClient) -> None:
    many = {f"X-H{i}": "v" for i in range(MAX_HEADERS + 1)}
    refused(await api.post("/api/v1/endpoints", json=endpoint(headers=many)), "headers")
    await nothing_stored(api)
    del many["X-H0"]
    await create_endpoint(api, "http://127.0.0.1:9/v1", headers=many)


async def test_headers_beyond_their_total_size_are_refused(api: httpx.AsyncClient) -> None:
    """Four headers of a 4-character name and a 4092-character value fill the bound
    exactly."""
    exact = {f"X-H{i}": "v" * (MAX_HEADER_BYTES // 4 - 4) for i in range(4)}
    assert sum(len(k) + len(v) for k, v in exact.items()) == MAX_HEADER_BYTES
    over = {**exact, "X-H0": exact["X-H0"] + "v"}
    message = refused(await api.post("/api/v1/endpoints", json=endpoint(headers=over)),
                      "headers")
    assert f"at most {MAX_HEADER_BYTES} bytes" in message
    await nothing_stored(api)
    await create_endpoint(api, "http://127.0.0.1:9/v1", headers=exact)


@pytest.mark.parametrize(("labels", "field"), [
    ({"k" * (MAX_LABEL_KEY_CHARS + 1): "v"}, "labels"),
    ({"team": "v" * (MAX_LABEL_VALUE_CHARS + 1)}, "labels.team"),
    ({f"k{i}": "v" for i in range(MAX_LABELS + 1)}, "labels"),
])
async def test_labels_beyond_their_bounds_are_refused(
        api: httpx.AsyncClient, labels: dict[str, str], field: str) -> None:
    r = await api.post("/api/v1/endpoints", json=endpoint(labels=labels))
    assert r.status_code == 422, r.text
    assert any(e["field"].startswith(field) for e in r.json()["errors"]), r.json()
    await nothing_stored(api)


async def test_an_over_long_name_is_refused_for_every_resource(api: httpx.AsyncClient) -> None:
    long = "n" * (MAX_NAME_CHARS + 1)
    refused(await api.post("/api/v1/endpoints", json=endpoint(name=long)), "name")
    created = await create_endpoint(api, "http://127.0.0.1:9/v1", name="n" * MAX_NAME_CHARS)
    for path, body in (
            ("/api/v1/probes", {"name": long, "endpoint_id": created["id"],
                                "interval_s": 60}),
            ("/api/v1/slos", {"name": long, "probes": ["p"], "objective": 0.99,
                              "sli": {"kind": "availability"}}),
            ("/api/v1/notifiers", {"name": long, "kind": "webhook",
                                   "url": "http://127.0.0.1:9/hook"})):
        refused(await api.post(path, json=body), "name")
        assert await listed(api, path) == []


async def test_an_over_long_url_is_refused(api: httpx.AsyncClient) -> None:
    url = "http://127.0.0.1:9/" + "v" * MAX_URL_CHARS
    refused(await api.post("/api/v1/endpoints", json=endpoint(base_url=url)), "base_url")
    refused(await api.post("/api/v1/endpoints", json=endpoint(metrics_url=url)),
            "metrics_url")
    refused(await api.post("/api/v1/notifiers", json={
        "name": "hook", "kind": "webhook", "url": url}), "url")
    await nothing_stored(api)
