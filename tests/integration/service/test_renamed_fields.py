"""Durations in the API end in `_s`: the old `_seconds` names are still read for one release,
with a `Warning: 299` header naming the new one, and still answered beside the new names."""

from __future__ import annotations

import httpx

from tests.integration.service.helpers import create_endpoint


async def test_a_probe_created_with_the_old_names_is_stored_and_warned_of(
        api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.post("/api/v1/probes", json={
        "name": "old", "endpoint_id": endpoint["id"], "interval_seconds": 600,
        "jitter_seconds": 5, "enabled": False})
    assert r.status_code == 201, r.text
    warnings = r.headers.get_list("warning")
    assert warnings == [
        '299 - "interval_seconds is deprecated and will be removed in the next release: '
        'use interval_s"',
        '299 - "jitter_seconds is deprecated and will be removed in the next release: '
        'use jitter_s"',
    ]
    probe = r.json()
    assert (probe["interval_s"], probe["jitter_s"]) == (600, 5)
    assert (probe["interval_seconds"], probe["jitter_seconds"]) == (600, 5)


async def test_the_new_names_draw_no_warning(api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.post("/api/v1/probes", json={
        "name": "new", "endpoint_id": endpoint["id"], "interval_s": 600, "jitter_s": 5,
        "enabled": False})
    assert r.status_code == 201, r.text
    assert "warning" not in r.headers
    patched = await api.patch(f"/api/v1/probes/{r.json()['id']}", json={"jitter_seconds": 7})
    assert patched.status_code == 200, patched.text
    assert patched.json()["jitter_s"] == 7
    assert "jitter_s" in patched.headers["warning"]


async def test_both_names_of_one_field_answer_422_naming_the_old_one(
        api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.post("/api/v1/probes", json={
        "name": "both", "endpoint_id": endpoint["id"], "interval_seconds": 600,
        "interval_s": 300})
    assert r.status_code == 422, r.text
    assert [e["field"] for e in r.json()["errors"]] == ["interval_seconds"]
    assert (await api.get("/api/v1/probes")).json()["items"] == []


async def test_the_schema_marks_the_old_names_deprecated(api: httpx.AsyncClient) -> None:
    schemas = (await api.get("/openapi.json")).json()["components"]["schemas"]
    read = next(s for name, s in schemas.items() if name.startswith("ProbeRead"))
    assert read["properties"]["interval_seconds"]["deprecated"] is True
    assert "interval_s" in read["required"]
