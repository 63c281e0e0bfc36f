"""Endpoint-down, no-data and drift alerts, evaluated over real stored runs; drift findings
are stored once per period and exported as sustain_drift_ratio."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from sustain.service.alerting.evaluator import AlertEvaluator, DriftWatch
from sustain.service.app import runtime_of
from sustain.service.runtime import Replica
from tests.integration.service.helpers import samples_of
from tests.integration.service.storage import create_probe_rows, fetch, seed_run, synthetic_samples


async def enable(state: Replica, probe_id: int, since: datetime) -> None:
    async with state.engine.begin() as connection:
        await connection.execute(text(
            "UPDATE probes SET enabled = true, schedule_since = :s, created_at = :s "
            "WHERE id = :p"), {"s": since, "p": probe_id})


async def firing(state: Replica) -> list[tuple[str, str]]:
    rows = await fetch(state.engine, "SELECT alertname, labels->>'probe' FROM alerts "
                                     "WHERE state = 'firing' ORDER BY 1, 2")
    return [(a, p) for a, p in rows]


@pytest.mark.usefixtures("api")
async def test_endpoint_down_fires_after_n_failed_runs_and_resolves_on_success(
        app: FastAPI) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine, "chat")
    now = datetime.now(UTC)
    await enable(state, probe_id, now - timedelta(minutes=10))
    rng = random.Random(1)
    evaluator = AlertEvaluator(state.sessions, "r1", 60, None, endpoint_down_runs=3)
    for i in range(3):
        at = now - timedelta(seconds=170 - 60 * i)
        await seed_run(state.engine, probe_id, at, synthetic_samples(5, at, rng, fail_every=1))
        await evaluator.evaluate_once(at + timedelta(seconds=5))
        expected = [("SustainEndpointDown", "chat")] if i == 2 else []
        assert await firing(state) == expected, f"after {i + 1} failed runs"
    await seed_run(state.engine, probe_id, now, synthetic_samples(5, now, rng))
    ((down,),) = await fetch(state.engine, "SELECT fingerprint FROM alerts "
                                           "WHERE alertname = 'SustainEndpointDown'")
    assert await evaluator.evaluate_once(now + timedelta(seconds=5)) == [(down, "resolved")]


@pytest.mark.usefixtures("api")
async def test_no_data_fires_after_three_quiet_intervals(app: FastAPI) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine, "quiet")
    now = datetime.now(UTC)
    await enable(state, probe_id, now - timedelta(seconds=150))  # interval 60 s
    evaluator = AlertEvaluator(state.sessions, "r1", 60, None)
    await evaluator.evaluate_once(now)
    assert await firing(state) == []
    await evaluator.evaluate_once(now + timedelta(seconds=40))
    assert await firing(state) == [("SustainNoData", "quiet")]
    at = now + timedelta(seconds=45)
    await seed_run(state.engine, probe_id, at, synthetic_samples(5, at, random.Random(2)))
    await evaluator.evaluate_once(now + timedelta(seconds=50))
    assert await firing(state) == []


async def test_drift_finding_fires_and_is_exported(api: httpx.AsyncClient,
                                                   app: FastAPI) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine, "drifty")
    now = datetime.now(UTC)
    rng = random.Random(3)
    for i in range(48):  # every 30 minutes for a day; the last 12 runs 40 % slower
        at = now - timedelta(hours=24) + timedelta(minutes=30 * i)
        scale = 1.4 if i >= 36 else 1.0
        await seed_run(state.engine, probe_id, at,
                       synthetic_samples(40, at, rng, ttft_scale=scale))
    async with state.engine.begin() as connection:
        await connection.execute(text("UPDATE probes SET enabled = true WHERE id = :p"),
                                 {"p": probe_id})
    watch = DriftWatch(window=timedelta(hours=6), baseline=timedelta(hours=18),
                       watched=(("ttft", "p50"),), every=timedelta(minutes=5))
    evaluators = [AlertEvaluator(state.sessions, f"r{i}", 60, None, drift=watch)
                  for i in range(2)]
    moment = now + timedelta(minutes=1)
    for evaluator in evaluators:
        await evaluator.evaluate_once(moment)
    rows = await fetch(state.engine, "SELECT verdict, ratio, change_at, evaluated_at "
                                     "FROM drift_findings")
    assert len(rows) == 1
    verdict, ratio, change_at, evaluated_at = rows[0]
    assert verdict == "regressed"
    assert 1.3 < ratio < 1.5
    assert abs(change_at - (now - timedelta(hours=6))) <= timedelta(minutes=60)
    assert evaluated_at == moment, "computed once, by one replica"
    assert ("SustainDrift", "drifty") in await firing(state)
    metrics = samples_of((await api.get("/metrics")).text)["sustain_drift_ratio"]
    ((labels, value),) = metrics
    assert labels == {"probe": "drifty", "metric": "ttft", "stat": "p50"}
    assert value == ratio
