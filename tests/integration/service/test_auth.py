"""API keys and roles: the role matrix over every operation of the OpenAPI document, key
lifecycle (shown once, hashed, revocable), 401/403 answers, anonymous reads and metrics access,
and the audit log of writes."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from sustain.service.app import create_app
from tests.conftest import asyncpg_dsn
from tests.integration.service.helpers import app_settings, create_endpoint, serving
from tests.processes import TEST_ADMIN_KEY

OPEN_PATHS = {"/healthz", "/readyz", "/metrics"}
"""Answered without a key by default (docs/security.md, Access: API keys, roles and the audit
log)."""
ADMIN_PREFIXES = ("/api/v1/keys", "/api/v1/audit")
AGENT_PREFIX = "/api/v1/agent/"
RANK = {"anonymous": -1, "viewer": 0, "editor": 1, "admin": 2}


def needed_role(method: str, path: str) -> str:
    """What the contract says an operation needs, written independently of the app."""
    if path in OPEN_PATHS:
        return "anonymous"
    if path.startswith(AGENT_PREFIX):
        return "agent"
    if path.startswith(ADMIN_PREFIXES):
        return "admin"
    return "viewer" if method in ("get", "head") else "editor"


def allowed(caller: str, needed: str) -> bool:
    """The agent role stands apart: it may do what an agent does and nothing else, and no
    other role may do that."""
    if needed == "anonymous":
        return True
    if "agent" in (caller, needed):
        return caller == needed
    return RANK[caller] >= RANK[needed]


def concrete(path: str) -> str:
    """A path template with placeholder ids (unknown objects: allowed callers get 404)."""
    return re.sub(r"\{[^}]+\}", "987654", path)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def make_key(api: httpx.AsyncClient, name: str, role: str,
                   location: str | None = None) -> str:
    r = await api.post("/api/v1/keys", json={"name": name, "role": role,
                                             **({"location": location} if location else {})})
    assert r.status_code == 201, r.text
    key = r.json()["key"]
    assert isinstance(key, str)
    return key


async def role_keys(api: httpx.AsyncClient) -> dict[str, dict[str, str]]:
    return {"anonymous": {}, "viewer": bearer(await make_key(api, "v", "viewer")),
            "editor": bearer(await make_key(api, "e", "editor")),
            "admin": bearer(await make_key(api, "a", "admin")),
            "agent": bearer(await make_key(api, "g", "agent", "eu-west-1"))}


async def test_every_operation_answers_each_role_as_the_matrix_says(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    callers = await role_keys(api)
    operations = [(method, path) for path, item in app.openapi()["paths"].items()
                  for method in item if method in ("get", "post", "put", "patch", "delete")]
    assert len(operations) > 40
    checked = 0
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://sustain.test") as bare:
        for method, path in operations:
            needed = needed_role(method, path)
            for caller, headers in callers.items():
                kwargs: dict[str, Any] = {"headers": headers}
                if method in ("post", "put", "patch"):
                    kwargs["json"] = {}
                r = await bare.request(method.upper(), concrete(path), **kwargs)
                where = f"{caller} {method.upper()} {path}: {r.status_code} {r.text[:200]}"
                if allowed(caller, needed):
                    assert r.status_code not in (401, 403), where
                    assert r.status_code < 500, where
                elif caller == "anonymous":
                    assert r.status_code == 401, where
                    assert r.headers["www-authenticate"].startswith("Bearer"), where
                    assert r.headers["content-type"] == "application/problem+json", where
                else:
                    assert r.status_code == 403, where
                    assert r.json()["title"] == "Forbidden", where
                checked += 1
    print(f"\nrole matrix: {len(operations)} operations x {len(callers)} callers = "
          f"{checked} calls")


PUBLIC_PAGES = {"/login", "/favicon.ico", "/docs", "/redoc", "/docs/redoc.js"}
"""Pages anyone may load: the sign-in form, the icon, the API docs and their assets (the
OpenAPI document they read is public too)."""


async def test_every_page_needs_a_viewer_and_refuses_an_agent_key(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    """The pages beside the OpenAPI operations, found from the pages' router: each sends a
    caller without a key, or with an agent key, to the sign-in form; every other role reads
    it (an unknown id is a 404 page)."""
    from fastapi.routing import APIRoute

    from sustain.service.web import routes, signin

    callers = await role_keys(api)
    pages = sorted(route.path for route in (*signin.router.routes, *routes.router.routes)
                   if isinstance(route, APIRoute)
                   and "GET" in (route.methods or set()) and route.path not in PUBLIC_PAGES)
    assert {"/", "/probes/{probe_id}", "/runs/{run_id}", "/runs/latest", "/compare"} <= \
        set(pages), pages
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://sustain.test") as bare:
        for path in pages:
            for caller, headers in callers.items():
                r = await bare.get(concrete(path), headers=headers)
                where = f"{caller} GET {path}: {r.status_code}"
                if caller in ("anonymous", "agent"):
                    assert r.status_code == 303, where
                    assert r.headers["location"] == "/login", where
                else:
                    assert r.status_code in (200, 404), where
                    assert r.headers["content-type"].startswith("text/html"), where


async def test_the_openapi_document_declares_the_bearer_scheme(app: FastAPI) -> None:
    document = app.openapi()
    assert document["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert document["paths"]["/api/v1/probes"]["post"]["security"] == [{"apiKey": []}]


@pytest.mark.parametrize("header", [
    "Bearer sk_sustain_unknown-key-0123456789abcdefghijklmnopq",
    "Bearer ", "Basic dXNlcjpwYXNz", "sk_sustain_no-scheme", "Bearer " + "x" * 5000,
    "Bearer a b c",
])
async def test_a_bad_or_malformed_key_is_401(api: httpx.AsyncClient, header: str) -> None:
    r = await api.get("/api/v1/probes", headers={"Authorization": header})
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == 'Bearer realm="sustain"'
    assert "sk_sustain_unknown" not in r.text


async def test_a_key_is_shown_once_stored_hashed_and_revocable(
        api: httpx.AsyncClient, database_url: str) -> None:
    r = await api.post("/api/v1/keys", json={"name": "grafana", "role": "viewer"})
    assert r.status_code == 201
    created = r.json()
    key = created["key"]
    assert key.startswith("sk_sustain_")
    assert len(key) - len("sk_sustain_") >= 43
    assert created["prefix"] == key[:17]
    assert created["created_by"] == "SUSTAIN_ADMIN_KEY"
    assert created["last_used_at"] is None

    listed = (await api.get("/api/v1/keys")).text
    assert key not in listed
    assert "key_hash" not in listed
    connection = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        stored = await connection.fetchrow("SELECT * FROM api_keys WHERE id = $1",
                                           created["id"])
    finally:
        await connection.close()
    assert stored is not None
    assert key not in " ".join(str(v) for v in stored.values())

    assert (await api.get("/api/v1/probes", headers=bearer(key))).status_code == 200
    (found,) = [k for k in (await api.get("/api/v1/keys")).json()["items"]
                if k["id"] == created["id"]]
    assert found["last_used_at"] is not None

    same_name = await api.post("/api/v1/keys", json={"name": "grafana", "role": "editor"})
    assert same_name.status_code == 409

    assert (await api.delete(f"/api/v1/keys/{created['id']}")).status_code == 204
    assert (await api.get("/api/v1/probes", headers=bearer(key))).status_code == 401
    (found,) = [k for k in (await api.get("/api/v1/keys")).json()["items"]
                if k["id"] == created["id"]]
    assert found["revoked_at"] is not None
    again = await api.post("/api/v1/keys", json={"name": "grafana", "role": "viewer"})
    assert again.status_code == 201
    assert (await api.delete("/api/v1/keys/987654")).status_code == 404


async def test_key_bodies_are_checked(api: httpx.AsyncClient) -> None:
    for body, field in (({"name": "x", "role": "root"}, "role"),
                        ({"name": "", "role": "viewer"}, "name"),
                        ({"name": "x", "role": "viewer", "key": "sk_sustain_mine"}, "key")):
        r = await api.post("/api/v1/keys", json=body)
        assert r.status_code == 422, r.text
        assert field in {e["field"] for e in r.json()["errors"]}


async def test_roles_nest_viewer_reads_editor_writes_admin_manages_keys(
        api: httpx.AsyncClient) -> None:
    callers = await role_keys(api)
    body = {"name": "sim", "base_url": "http://127.0.0.1:9/v1", "model": "sim-model"}
    assert (await api.post("/api/v1/endpoints", json=body,
                           headers=callers["viewer"])).status_code == 403
    assert (await api.post("/api/v1/endpoints", json=body,
                           headers=callers["editor"])).status_code == 201
    assert (await api.get("/api/v1/endpoints", headers=callers["viewer"])).status_code == 200
    assert (await api.get("/api/v1/keys", headers=callers["editor"])).status_code == 403
    assert (await api.get("/api/v1/audit", headers=callers["editor"])).status_code == 403
    assert (await api.get("/api/v1/keys", headers=callers["admin"])).status_code == 200


@pytest.fixture
async def open_reads_api(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    # anonymous reads answer loopback Host names or those listed; the in-process client's
    # Host is sustain.test
    app = create_app(app_settings(database_url, auto_migrate=False, anonymous_read=True,
                                  metrics_auth=True, allowed_hosts="sustain.test"))
    async with serving(app) as client:
        yield client


async def test_anonymous_reads_when_allowed_but_never_writes(
        open_reads_api: httpx.AsyncClient) -> None:
    client = open_reads_api
    client.headers.pop("Authorization")
    assert (await client.get("/api/v1/probes")).status_code == 200
    assert (await client.post("/api/v1/endpoints", json={})).status_code == 401
    assert (await client.get("/api/v1/keys")).status_code == 401


async def test_metrics_need_a_viewer_when_metrics_auth_is_set(
        open_reads_api: httpx.AsyncClient) -> None:
    client = open_reads_api
    assert (await client.get("/metrics")).status_code == 200
    client.headers.pop("Authorization")
    # anonymous reads cover the API, and /metrics with SUSTAIN_METRICS_AUTH is a read
    assert (await client.get("/metrics")).status_code == 200
    assert (await client.get("/metrics", headers={
        "Authorization": "Bearer sk_sustain_wrong-0123456789abcdefghijklmnopqrstu"
    })).status_code == 401


async def test_metrics_auth_refuses_anonymous_scrapes(database_url: str) -> None:
    app = create_app(app_settings(database_url, auto_migrate=False, metrics_auth=True))
    async with serving(app) as client:
        assert (await client.get("/metrics")).status_code == 200
        viewer = await make_key(client, "prometheus", "viewer")
        client.headers.pop("Authorization")
        assert (await client.get("/metrics")).status_code == 401
        assert (await client.get("/metrics", headers=bearer(viewer))).status_code == 200
        assert (await client.get("/healthz")).status_code == 200


async def test_metrics_are_open_by_default(api: httpx.AsyncClient) -> None:
    api.headers.pop("Authorization")
    assert (await api.get("/metrics")).status_code == 200
    assert (await api.get("/readyz")).status_code == 200


async def test_every_write_is_audited_with_who_what_and_result(
        api: httpx.AsyncClient) -> None:
    editor = await make_key(api, "ci-editor", "editor")
    viewer = await make_key(api, "dash", "viewer")
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1",
                                     headers={"X-Tenant": "tenant-7f3a"})
    r = await api.patch(f"/api/v1/endpoints/{endpoint['id']}", json={"model": "m2"},
                        headers=bearer(editor))
    assert r.status_code == 200
    assert (await api.delete(f"/api/v1/endpoints/{endpoint['id']}",
                             headers=bearer(viewer))).status_code == 403
    assert (await api.post("/api/v1/endpoints", json={}, headers={
        "Authorization": "Bearer nope"})).status_code == 401
    await api.get("/api/v1/endpoints", headers=bearer(editor))

    page = (await api.get("/api/v1/audit", params={"limit": 3})).json()
    entries = page["items"]
    assert [(e["actor"], e["method"], e["path"], e["status"]) for e in entries] == [
        ("anonymous", "POST", "/api/v1/endpoints", 401),
        ("dash", "DELETE", f"/api/v1/endpoints/{endpoint['id']}", 403),
        ("ci-editor", "PATCH", f"/api/v1/endpoints/{endpoint['id']}", 200),
    ]
    assert entries[2]["object_id"] == str(endpoint["id"])
    assert entries[2]["role"] == "editor"
    assert page["next_cursor"] is not None
    older = (await api.get("/api/v1/audit", params={"cursor": page["next_cursor"]})).json()
    created = [e for e in older["items"] if e["path"] == "/api/v1/endpoints"]
    assert created[0]["object_id"] == str(endpoint["id"])
    assert created[0]["actor"] == "SUSTAIN_ADMIN_KEY"
    assert {e["path"] for e in older["items"]} >= {"/api/v1/keys"}
    everything = (await api.get("/api/v1/audit", params={"limit": 1000})).text
    assert "tenant-7f3a" not in everything
    assert editor not in everything
    assert viewer not in everything
    assert "GET" not in {e["method"] for e in older["items"] + entries}


async def test_admin_key_itself_is_never_in_a_response(api: httpx.AsyncClient) -> None:
    for path in ("/api/v1/keys", "/api/v1/audit", "/api/v1/replicas", "/metrics"):
        assert TEST_ADMIN_KEY not in (await api.get(path)).text


async def test_a_silence_without_created_by_is_signed_with_the_key_name(
        api: httpx.AsyncClient) -> None:
    editor = await make_key(api, "oncall-bot", "editor")
    r = await api.post("/api/v1/silences", headers=bearer(editor), json={
        "matchers": [{"name": "probe", "value": "p1"}], "ends_at": "2999-01-01T00:00:00Z",
        "comment": "maintenance"})
    assert r.status_code == 201, r.text
    assert r.json()["created_by"] == "oncall-bot"
