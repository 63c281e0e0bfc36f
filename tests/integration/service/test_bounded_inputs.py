"""Caller-given times and patterns are bounded: times at the edges of the calendar
are 422 naming the parameter, never a 500 and never stored; silence regexes are RE2."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

EDGES = ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z", "1969-12-31T23:59:59Z"]


@pytest.mark.parametrize("edge", EDGES)
@pytest.mark.parametrize(("path", "param"), [
    ("/api/v1/probes/1/series?metric=ttft&stat=p99", "to"),
    ("/api/v1/probes/1/series?metric=ttft&stat=p99", "from"),
    ("/api/v1/probes/1/summary?window=30d", "to"),
    ("/api/v1/probes/1/drift?metric=ttft&stat=p99", "to"),
    ("/api/v1/slos/1/status", "at"),
    ("/api/v1/runs", "from"),
    ("/api/v1/runs", "to"),
])
async def test_times_outside_the_supported_range_are_422_naming_the_parameter(
        api: httpx.AsyncClient, path: str, param: str, edge: str) -> None:
    r = await api.get(path, params={param: edge})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == f"query.{param}"
    assert "between 1970-01-01 and 2999-12-31" in r.json()["errors"][0]["message"]


@pytest.mark.parametrize(("field", "value"), [
    ("starts_at", "0001-01-01T00:00:00Z"),
    ("ends_at", "9999-12-31T23:59:59.999999Z"),
    ("ends_at", "3000-01-01T00:00:00Z"),
])
async def test_silence_times_out_of_range_are_refused_and_never_stored(
        api: httpx.AsyncClient, field: str, value: str) -> None:
    body = {"matchers": [{"name": "probe", "value": "p"}], "comment": "c", "created_by": "me",
            "ends_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat(), field: value}
    r = await api.post("/api/v1/silences", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == field
    listed = await api.get("/api/v1/silences")
    assert (listed.status_code, listed.json()["items"]) == (200, [])


async def test_a_silence_regex_re2_refuses_is_422_naming_the_matcher(
        api: httpx.AsyncClient) -> None:
    r = await api.post("/api/v1/silences", json={
        "matchers": [{"name": "probe", "value": "x"},
                     {"name": "slo", "value": "(?=chat)", "is_regex": True}],
        "ends_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat(),
        "comment": "c", "created_by": "me"})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == "matchers.1.value"
    assert (await api.get("/api/v1/silences")).json()["items"] == []


async def test_a_silence_that_lasts_until_the_end_of_the_range_works(
        api: httpx.AsyncClient) -> None:
    r = await api.post("/api/v1/silences", json={
        "matchers": [{"name": "probe", "value": "(a+)+$", "is_regex": True}],
        "ends_at": "2999-12-31T00:00:00Z", "comment": "c", "created_by": "me"})
    assert r.status_code == 201, r.text
    silence = r.json()
    assert silence["state"] == "active"
    assert (await api.get("/api/v1/silences")).status_code == 200
    assert (await api.delete(f"/api/v1/silences/{silence['id']}")).status_code == 204
    assert (await api.get(f"/api/v1/silences/{silence['id']}")).json()["state"] == "expired"
