"""Whatever JSON arrives, the API answers with a 2xx or a 4xx problem, never a 500."""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)

ENDPOINT_KEYS = ["name", "base_url", "api_kind", "model", "headers", "auth_secret_ref",
                 "timeout_connect_s", "timeout_first_token_s", "timeout_total_s", "tls_verify",
                 "labels"]
PROBE_KEYS = ["name", "endpoint_id", "workload", "profile", "interval_s",
              "jitter_s", "enabled", "slo", "labels"]


def bodies(keys: list[str]) -> st.SearchStrategy[Any]:
    known = st.dictionaries(st.sampled_from(keys), JSON, max_size=len(keys))
    return known | JSON


OK_STATUSES = {200, 201, 204, 404, 409, 422}
JSON_HEADERS = {"content-type": "application/json"}


def raw(body: Any) -> bytes:
    """Python's encoder, which also writes NaN and Infinity literals (that FastAPI parses)."""
    return json.dumps(body).encode()
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(body=bodies(ENDPOINT_KEYS))
async def test_endpoint_bodies_never_cause_a_500(api: httpx.AsyncClient, body: Any) -> None:
    r = await api.post("/api/v1/endpoints", content=raw(body), headers=JSON_HEADERS)
    assert r.status_code in OK_STATUSES, (body, r.text)
    if r.status_code >= 400:
        assert r.headers["content-type"] == "application/problem+json"
    else:
        await api.delete(f"/api/v1/endpoints/{r.json()['id']}")


async def fuzz_target(api: httpx.AsyncClient) -> tuple[int, int]:
    """An endpoint and a probe to aim PATCHes and endpoint_ids at (created once per test)."""
    endpoints = (await api.get("/api/v1/endpoints")).json()["items"]
    target = next((e for e in endpoints if e["name"] == "fz"), None)
    if target is None:
        target = (await api.post("/api/v1/endpoints", json={
            "name": "fz", "base_url": "http://127.0.0.1:9/v1", "model": "m"})).json()
    probes = (await api.get("/api/v1/probes")).json()["items"]
    probe = next((p for p in probes if p["name"] == "fz"), None)
    if probe is None:
        probe = (await api.post("/api/v1/probes", json={
            "name": "fz", "endpoint_id": target["id"], "interval_s": 60,
            "enabled": False})).json()
    return int(target["id"]), int(probe["id"])


@SETTINGS
@given(body=bodies(PROBE_KEYS), on_valid_base=st.booleans())
async def test_probe_bodies_never_cause_a_500(api: httpx.AsyncClient, body: Any,
                                              on_valid_base: bool) -> None:
    endpoint_id, probe_id = await fuzz_target(api)
    if on_valid_base and isinstance(body, dict):
        body = {"name": "fz-new", "endpoint_id": endpoint_id, "interval_s": 60, **body}
    r = await api.post("/api/v1/probes", content=raw(body), headers=JSON_HEADERS)
    assert r.status_code in OK_STATUSES, (body, r.text)
    if r.status_code == 201:
        await api.delete(f"/api/v1/probes/{r.json()['id']}")
    r = await api.patch(f"/api/v1/probes/{probe_id}", content=raw(body), headers=JSON_HEADERS)
    assert r.status_code in OK_STATUSES, (body, r.text)
