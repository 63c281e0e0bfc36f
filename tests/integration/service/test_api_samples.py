"""/api/v1/runs/{id}/samples and /api/v1/runs: JSON pages and CSV agree, cursors give every
sample exactly once while a run is still writing, filters and bad parameters."""

from __future__ import annotations

import asyncio
import csv
import io
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from sustain.service.app import runtime_of
from sustain.service.runs.rows import SAMPLE_COLUMNS
from tests.integration.service.storage import (
    create_probe_rows,
    create_run,
    final_of,
    seed_run,
    synthetic_samples,
)

NOW = datetime.now(UTC).replace(microsecond=0)


async def all_pages(api: httpx.AsyncClient, run_id: int, limit: int,
                    statuses: list[str] | None = None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        page = (await api.get(f"/api/v1/runs/{run_id}/samples", params=params)).json()
        items.extend(page["items"])
        if statuses is not None:
            statuses.append(page["run_status"])
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def typed(column: str, value: str) -> Any:
    """A CSV cell back to the JSON value."""
    if value == "":
        return None
    if column == "tokens_server_counted":
        return value == "true"
    if column in ("outcome", "error_class"):
        return value
    if column == "sent_at":
        return datetime.fromisoformat(value)
    number = float(value)
    return int(number) if column in ("run_id", "pos", "probe_id", "seq", "stage", "itl_count",
                                     "input_tokens", "output_tokens", "http_status") else number


async def test_csv_round_trip_equals_json(api: httpx.AsyncClient, app: FastAPI) -> None:
    engine = runtime_of(app).engine
    probe_id = await create_probe_rows(engine)
    run_id = await seed_run(engine, probe_id, NOW,
                            synthetic_samples(230, NOW, random.Random(1), fail_every=7))
    items = await all_pages(api, run_id, limit=100)
    r = await api.get(f"/api/v1/runs/{run_id}/samples", params={"format": "csv"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    reader = csv.reader(io.StringIO(r.text))
    header = next(reader)
    assert tuple(header) == SAMPLE_COLUMNS
    from_csv = [{c: typed(c, v) for c, v in zip(header, row, strict=True)} for row in reader]
    for item in items:
        item["sent_at"] = datetime.fromisoformat(item["sent_at"])
    assert len(items) == 230
    assert from_csv == items
    assert sum(1 for i in items if i["error_class"] == "http_5xx") == 230 // 7


async def test_a_csv_page_carries_the_next_cursor_in_a_header(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    engine = runtime_of(app).engine
    probe_id = await create_probe_rows(engine)
    run_id = await seed_run(engine, probe_id, NOW, synthetic_samples(30, NOW, random.Random(2)))
    first = await api.get(f"/api/v1/runs/{run_id}/samples",
                          params={"format": "csv", "limit": 20})
    assert len(first.text.splitlines()) == 21
    second = await api.get(f"/api/v1/runs/{run_id}/samples", params={
        "format": "csv", "limit": 20, "cursor": first.headers["x-next-cursor"]})
    assert len(second.text.splitlines()) == 11
    assert "x-next-cursor" not in second.headers


async def test_cursor_pagination_returns_every_sample_once_while_samples_arrive(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine)
    run_id = await create_run(state.engine, probe_id, NOW)
    samples = synthetic_samples(600, NOW, random.Random(3))
    random.Random(4).shuffle(samples)  # completion order differs from request order

    async def produce() -> None:
        sink = state.buffer.open(run_id, probe_id)
        rng = random.Random(5)
        for start in range(0, len(samples), 40):
            for sample in samples[start:start + 40]:
                sink.put(sample)
            await asyncio.sleep(rng.uniform(0.0, 0.08))
        sink.finish(final_of(run_id, probe_id, NOW, samples))

    producer = asyncio.create_task(produce())
    statuses: list[str] = []
    items = await all_pages(api, run_id, limit=17, statuses=statuses)
    await producer
    assert statuses[0] == "running"
    assert statuses[-1] == "succeeded"
    assert sorted(i["seq"] for i in items) == list(range(600))
    assert [i["pos"] for i in items] == list(range(600))


async def test_runs_filter_by_probe_status_and_time_with_cursor_pages(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    engine = runtime_of(app).engine
    first, second = await create_probe_rows(engine, "a"), await create_probe_rows(engine, "b")
    ids = [await create_run(engine, first, NOW - timedelta(hours=h), status="succeeded")
           for h in range(10)]
    await create_run(engine, second, NOW, status="succeeded")
    await create_run(engine, first, NOW, status="failed")
    seen: list[int] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"probe_id": first, "status": "succeeded", "limit": 3,
                                  "from": (NOW - timedelta(hours=7, minutes=30)).isoformat(),
                                  "to": (NOW + timedelta(minutes=1)).isoformat()}
        if cursor:
            params["cursor"] = cursor
        page = (await api.get("/api/v1/runs", params=params)).json()
        seen.extend(r["id"] for r in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(ids[:8], reverse=True)


@pytest.mark.parametrize(("path", "params", "field"), [
    ("/api/v1/runs/{run}/samples", {"format": "xml"}, "query.format"),
    ("/api/v1/runs/{run}/samples", {"cursor": "garbage"}, "query.cursor"),
    ("/api/v1/runs/{run}/samples", {"limit": 0}, "query.limit"),
    ("/api/v1/runs/{run}/samples", {"limit": 10_001}, "query.limit"),
    ("/api/v1/runs", {"cursor": "bm9wZQ"}, "query.cursor"),
    ("/api/v1/runs", {"from": "2026-12-02T00:00:00Z", "to": "2026-12-01T00:00:00Z"},
     "query.from"),
    ("/api/v1/runs", {"from": "yesterday"}, "query.from"),
])
async def test_bad_sample_and_run_parameters_answer_422_naming_them(
        api: httpx.AsyncClient, app: FastAPI, path: str, params: dict[str, Any],
        field: str) -> None:
    engine = runtime_of(app).engine
    run_id = await create_run(engine, await create_probe_rows(engine), NOW)
    r = await api.get(path.format(run=run_id), params=params)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert field in [e["field"] for e in r.json()["errors"]]


async def test_samples_of_an_unknown_run_are_404(api: httpx.AsyncClient) -> None:
    assert (await api.get("/api/v1/runs/999999/samples")).status_code == 404
