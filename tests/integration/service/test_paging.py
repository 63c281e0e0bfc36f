"""Every list answers one page at a time (`GET /api/v1/endpoints` once answered 266 MB):
`?limit=` (default SUSTAIN_PAGE_SIZE, at most SUSTAIN_MAX_PAGE_SIZE) and `?cursor=`, with
`{"items": [...], "next_cursor": ...}`; following the cursors visits every item once, in
order, even while items are added."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from sustain.service.api import cursor
from sustain.service.app import create_app
from tests.integration.service.helpers import app_settings, create_endpoint, serving

PAGE, MAX_PAGE = 2, 3

LISTS = ["/api/v1/endpoints", "/api/v1/probes", "/api/v1/slos", "/api/v1/notifiers",
         "/api/v1/silences", "/api/v1/keys", "/api/v1/alerts", "/api/v1/alerts/history",
         "/api/v1/deliveries", "/api/v1/runs", "/api/v1/audit", "/api/v1/replicas"]


@pytest.fixture
def app(database_url: str) -> FastAPI:
    return create_app(app_settings(database_url, auto_migrate=False, page_size=PAGE,
                                   max_page_size=MAX_PAGE))


@pytest.fixture
async def api(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(app) as client:
        yield client


async def walk(api: httpx.AsyncClient, path: str, **params: Any
               ) -> tuple[list[dict[str, Any]], list[int]]:
    """Every item of a list, following the cursors; and the size of each page."""
    items: list[dict[str, Any]] = []
    sizes: list[int] = []
    following: str | None = None
    while True:
        r = await api.get(path, params=params | ({"cursor": following} if following else {}))
        assert r.status_code == 200, r.text
        page = r.json()
        items += page["items"]
        sizes.append(len(page["items"]))
        following = page["next_cursor"]
        if following is None:
            return items, sizes


def field_of(r: httpx.Response) -> str:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    return str(r.json()["errors"][0]["field"])


async def test_pages_walk_every_endpoint_once_in_order_at_the_default_size(
        api: httpx.AsyncClient) -> None:
    made = [(await create_endpoint(api, "http://127.0.0.1:9/v1", name=f"e{i}"))["id"]
            for i in range(5)]
    items, sizes = await walk(api, "/api/v1/endpoints")
    assert [e["id"] for e in items] == made
    assert sizes == [2, 2, 1], "SUSTAIN_PAGE_SIZE when no limit is given"
    items, sizes = await walk(api, "/api/v1/endpoints", limit=3)
    assert [e["id"] for e in items] == made
    assert sizes == [3, 2]


async def test_items_added_while_paging_are_neither_repeated_nor_skipped(
        api: httpx.AsyncClient) -> None:
    made = [(await create_endpoint(api, "http://127.0.0.1:9/v1", name=f"e{i}"))["id"]
            for i in range(3)]
    first = (await api.get("/api/v1/endpoints")).json()
    made.append((await create_endpoint(api, "http://127.0.0.1:9/v1", name="late"))["id"])
    rest, _ = await walk(api, "/api/v1/endpoints", cursor=first["next_cursor"])
    assert [e["id"] for e in first["items"] + rest] == made


async def test_newest_first_lists_page_the_same_way(api: httpx.AsyncClient) -> None:
    ends = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    made = []
    for i in range(5):
        r = await api.post("/api/v1/silences", json={
            "matchers": [{"name": "probe", "value": f"p{i}"}], "ends_at": ends,
            "comment": "paging"})
        assert r.status_code == 201, r.text
        made.append(r.json()["id"])
    items, sizes = await walk(api, "/api/v1/silences", state="active")
    assert [s["id"] for s in items] == made[::-1]
    assert sizes == [2, 2, 1]
    assert (await walk(api, "/api/v1/silences", state="expired"))[0] == []
    audit, _ = await walk(api, "/api/v1/audit")
    assert len({a["id"] for a in audit}) == len(audit) >= 5


@pytest.mark.parametrize("path", LISTS)
async def test_a_limit_above_the_maximum_is_422_naming_query_limit(
        api: httpx.AsyncClient, path: str) -> None:
    r = await api.get(path, params={"limit": MAX_PAGE + 1})
    assert field_of(r) == "query.limit"
    assert "SUSTAIN_MAX_PAGE_SIZE" in r.json()["detail"]
    assert field_of(await api.get(path, params={"limit": 0})) == "query.limit"
    r = await api.get(path, params={"limit": MAX_PAGE})
    assert r.status_code == 200, r.text
    assert set(r.json()) >= {"items", "next_cursor"}


@pytest.mark.parametrize("path", LISTS)
async def test_a_cursor_this_api_did_not_return_is_422_naming_query_cursor(
        api: httpx.AsyncClient, path: str) -> None:
    for bad in ("not-a-cursor", cursor.encode("elsewhere", 5), cursor.encode_key("x", ("a",)),
                "!" * 40):
        assert field_of(await api.get(path, params={"cursor": bad})) == "query.cursor", bad


async def test_keyset_cursors_of_alerts_and_replicas_are_accepted(
        api: httpx.AsyncClient) -> None:
    """Lists ordered by more than one column (or by text) carry the whole key."""
    for path, key in (("/api/v1/alerts", ("SustainSloBurnRate", "00ff")),
                      ("/api/v1/alerts/history", (1_700_000_000_000_000, 7)),
                      ("/api/v1/replicas", ("a",))):
        kind = {"/api/v1/alerts": "alerts", "/api/v1/alerts/history": "alert-events",
                "/api/v1/replicas": "replicas"}[path]
        r = await api.get(path, params={"cursor": cursor.encode_key(kind, key)})
        assert r.status_code == 200, r.text
    replicas, _ = await walk(api, "/api/v1/replicas")
    assert len(replicas) == 1
