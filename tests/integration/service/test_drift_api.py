"""/api/v1/probes/{id}/drift on real Postgres: a step in p99 TTFT is found with the run where
it began, a steady probe shows no change, a pinned baseline run works, bad parameters are
named."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI

from sustain.service.app import runtime_of
from tests.integration.service.storage import create_probe_rows, seed_run, synthetic_samples

END = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
BASELINE_RUNS, RECENT_RUNS = 30, 12
STEP_AT = BASELINE_RUNS + 3


async def seed(app: FastAPI, step: float, name: str = "p1") -> tuple[int, list[int]]:
    """Hourly runs of 1,000 requests, the last RECENT_RUNS in the recent 12 h; from STEP_AT
    on, TTFT multiplied by `step`."""
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine, name)
    rng = random.Random(5)
    start = END - timedelta(hours=BASELINE_RUNS + RECENT_RUNS)
    run_ids = []
    for i in range(BASELINE_RUNS + RECENT_RUNS):
        at = start + timedelta(hours=i, minutes=10)
        samples = synthetic_samples(1000, at, rng, ttft_scale=step if i >= STEP_AT else 1.0)
        run_ids.append(await seed_run(state.engine, probe_id, at, samples))
    return probe_id, run_ids


async def drift(api: httpx.AsyncClient, probe_id: int, **params: str | int
                ) -> dict[str, object]:
    defaults: dict[str, str | int] = {"metric": "ttft", "stat": "p99", "window": "12h",
                                      "baseline": "30h", "to": END.isoformat()}
    query = defaults | params
    r = await api.get(f"/api/v1/probes/{probe_id}/drift", params=query)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_a_step_in_p99_ttft_is_found_with_the_run_where_it_began(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    probe_id, run_ids = await seed(app, step=1.25)
    body = await drift(api, probe_id)
    assert body["verdict"] == "regressed"
    assert body["recent"]["runs"] == RECENT_RUNS  # type: ignore[index]
    assert body["baseline"]["runs"] == BASELINE_RUNS  # type: ignore[index]
    assert 1.1 < body["ratio"] < 1.35  # type: ignore[operator]
    assert body["shift"] == pytest.approx(1.25, rel=0.08)
    point = body["change_point"]
    assert isinstance(point, dict)
    assert abs(run_ids.index(point["run_id"]) - STEP_AT) <= 2

    pinned = await drift(api, probe_id, baseline_run=run_ids[5])
    assert pinned["verdict"] == "regressed"
    assert pinned["baseline_run"] == run_ids[5]


async def test_a_steady_probe_shows_no_change(api: httpx.AsyncClient, app: FastAPI) -> None:
    probe_id, _ = await seed(app, step=1.0)
    body = await drift(api, probe_id)
    assert body["verdict"] == "no_change"
    assert body["change_point"] is None
    assert body["ratio"] == pytest.approx(1.0, abs=0.05)


async def test_without_runs_the_data_is_insufficient(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine)
    body = await drift(api, probe_id)
    assert body["verdict"] == "insufficient_data"
    assert body["ratio"] is None


@pytest.mark.parametrize(("params", "field"), [
    ({"stat": "availability"}, "query.stat"),
    ({"window": "1y"}, "query.window"),
    ({"baseline": "200d"}, "query.baseline"),
    ({"metric": "vibes"}, "query.metric"),
    ({"baseline_run": 999999}, "query.baseline_run"),
])
async def test_bad_parameters_are_named(api: httpx.AsyncClient, app: FastAPI,
                                        params: dict[str, str | int], field: str) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine)
    r = await api.get(f"/api/v1/probes/{probe_id}/drift", params=params)
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == field


async def test_a_shorter_answer_and_failing_canaries_are_found_as_drift(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    """A silent model swap: from STEP_AT on, answers 5 tokens instead of 9 and one canary in
    four fails (every one passed before)."""
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine, "swapped")
    rng = random.Random(9)
    start = END - timedelta(hours=BASELINE_RUNS + RECENT_RUNS)
    for i in range(BASELINE_RUNS + RECENT_RUNS):
        at = start + timedelta(hours=i, minutes=10)
        swapped = i >= STEP_AT
        samples = synthetic_samples(200, at, rng, output_tokens=5 if swapped else 9,
                                    canary_fail_every=4 if swapped else 10**9)
        await seed_run(state.engine, probe_id, at, samples)
    length = await drift(api, probe_id, metric="output_tokens", stat="mean")
    assert length["verdict"] == "improved"  # lower, as a latency would be: a change either way
    assert length["ratio"] == pytest.approx(5 / 9, rel=0.02)
    quality = await drift(api, probe_id, metric="quality", stat="mean")
    assert quality["verdict"] == "regressed"
    assert quality["ratio"] == pytest.approx(1.25, rel=0.03)
