"""A run's summary is stored as a compressed record, with only what SQL reads kept as JSONB;
the run answers the same through the API whether it was stored so or before the records, and
the storage job converts runs stored before, leaving their answers as they were."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.db.summary_records import convert_old
from sustain.service.runs import summary_record
from tests.integration.service.storage import (
    create_probe_rows,
    fetch,
    seed_run,
    synthetic_samples,
)

START = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)

pytestmark = pytest.mark.usefixtures("storage_job_packs_nothing")


async def answers(api: httpx.AsyncClient, run_ids: list[int]) -> list[Any]:
    runs = [(await api.get(f"/api/v1/runs/{run_id}")).json() for run_id in run_ids]
    listed = (await api.get("/api/v1/runs", params={"probe": "p1", "limit": 100})).json()
    window = {"from": (START - timedelta(hours=1)).isoformat(),
              "to": (START + timedelta(hours=2)).isoformat()}
    compared = await api.get("/api/v1/compare", params={"probe": "p1", **window})
    assert compared.status_code == 200, compared.text
    assert runs[0]["summary"]["attempts"] == 1
    return [runs, listed, compared.json()]


async def seeded(engine: AsyncEngine) -> list[int]:
    probe_id = await create_probe_rows(engine)
    rng = random.Random(4)
    return [await seed_run(engine, probe_id, START + timedelta(minutes=i),
                           synthetic_samples(n, START + timedelta(minutes=i), rng, fail_every=7))
            for i, n in enumerate((1, 30, 200))]


async def test_the_json_keeps_only_what_sql_reads_and_the_record_the_whole_summary(
        api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    run_ids = await seeded(engine)
    summaries = [(await api.get(f"/api/v1/runs/{run_id}")).json()["summary"]
                 for run_id in run_ids]
    stored = await fetch(engine, "SELECT summary, summary_record FROM runs ORDER BY id")
    for (kept, record), summary in zip(stored, summaries, strict=True):
        whole = summary_record.unpack(bytes(record))
        assert kept == summary_record.sql_part(whole)
        assert "ttft_ms" in whole
        assert whole["ttft_ms"] == summary["ttft_ms"]
        assert whole["attempts"] == summary["attempts"]


async def test_runs_stored_before_the_records_answer_alike_and_are_converted(
        api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    run_ids = await seeded(engine)
    before = await answers(api, run_ids)
    async with engine.begin() as connection:  # as a release before the records stored them
        for run_id, record in await fetch(engine, "SELECT id, summary_record FROM runs"):
            await connection.execute(text(
                "UPDATE runs SET summary = CAST(:whole AS jsonb), summary_record = NULL "
                "WHERE id = :id"),
                {"whole": json.dumps(summary_record.unpack(bytes(record))), "id": run_id})
    assert await fetch(engine, "SELECT count(*) FROM runs WHERE summary_record IS NULL") == [
        (3,)]
    assert await answers(api, run_ids) == before

    assert await convert_old(engine) == 3

    assert await fetch(engine, "SELECT count(*) FROM runs WHERE summary_record IS NULL") == [
        (0,)]
    assert await answers(api, run_ids) == before
    assert await convert_old(engine) == 0
