"""/api/v1/probes/{id}/series and /summary on real Postgres: percentiles from merged sketches
within 1 % of the exact ones from raw samples, sums for rates, empty windows absent, and bad
parameters named."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import make_url

from sustain.probes.measure.confidence import min_samples
from sustain.probes.measure.percentiles import QUANTILES, quantile
from sustain.service.app import runtime_of
from sustain.service.db.engine import create_engine
from tests.conftest import FreshDatabases, _admin, run_sync
from tests.integration.service.storage import create_probe_rows, fetch, seed_run, synthetic_samples

START = datetime(2026, 11, 20, 9, 17, tzinfo=UTC)
"""Not on an hour: runs spread over partial and whole hours and two days."""
RUN_EVERY = timedelta(minutes=23)
RUNS = 90


async def seed(url: str) -> int:
    """RUNS runs of 120 samples each, every RUN_EVERY from START; the probe's id."""
    engine = create_engine(url)
    try:
        probe_id = await create_probe_rows(engine)
        rng = random.Random(7)
        for i in range(RUNS):
            at = START + i * RUN_EVERY
            await seed_run(engine, probe_id, at,
                           synthetic_samples(120, at, rng, fail_every=25 if i % 3 else 0))
        return probe_id
    finally:
        await engine.dispose()


@pytest.fixture(scope="module")
def seeded_template(pg_server_url: str, fresh_databases: FreshDatabases
                    ) -> Iterator[tuple[str, int]]:
    """A database at head holding the seeded runs, seeded once for the module (seconds of
    this process's CPU); each test that reads them gets a copy of it (a fraction of a second).
    Its name, and the probe's id."""
    name = fresh_databases.take()
    try:
        yield name, run_sync(seed(
            make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)))
    finally:
        fresh_databases.give_back(name)


@pytest.fixture
def database_url(request: pytest.FixtureRequest, pg_server_url: str,
                 fresh_databases: FreshDatabases) -> Iterator[str]:
    """The test's own database: a copy of the seeded one for the tests that read the seeded
    runs (`seeded`), else a fresh one at head."""
    if "seeded" not in request.fixturenames:
        name = fresh_databases.take()
        yield make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
        fresh_databases.give_back(name)
        return
    template, _ = request.getfixturevalue("seeded_template")
    name = f"sustain_t_{uuid.uuid4().hex[:12]}"
    run_sync(_admin(pg_server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
    yield make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
    fresh_databases.give_back(name)


@pytest.fixture
def seeded(seeded_template: tuple[str, int], api: httpx.AsyncClient) -> int:  # noqa: ARG001 - api: the app runs
    """The seeded probe's id, in the test's copy of the seeded database, with the app running
    on it."""
    return seeded_template[1]


async def exact(app: FastAPI, probe_id: int, column: str, start: datetime, end: datetime
                ) -> list[float]:
    state = runtime_of(app)
    rows = await fetch(
        state.engine,
        f"SELECT s.{column} FROM samples s JOIN runs r ON r.id = s.run_id "
        "WHERE r.probe_id = :p AND r.scheduled_for >= :a AND r.scheduled_for < :b "
        f"AND s.outcome = 'success' AND s.{column} IS NOT NULL ORDER BY 1",
        p=probe_id, a=start, b=end)
    return [v for (v,) in rows]


@pytest.mark.parametrize("step", ["10m", "1h", "3h", "1d"])
@pytest.mark.parametrize("stat", ["p50", "p90", "p99"])
async def test_series_percentiles_are_within_one_percent_of_exact_ones_from_raw_samples(
        api: httpx.AsyncClient, app: FastAPI, seeded: int, step: str, stat: str) -> None:
    end = START + RUNS * RUN_EVERY
    r = await api.get(f"/api/v1/probes/{seeded}/series", params={
        "metric": "ttft", "stat": stat, "step": step, "from": START.isoformat(),
        "to": end.isoformat()})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["unit"] == "ms"
    assert body["points"]
    for point in body["points"]:
        a, b = datetime.fromisoformat(point["start"]), datetime.fromisoformat(point["end"])
        values = await exact(app, seeded, "ttft_ms", a, b)
        assert point["count"] == len(values)
        assert point["value"] == pytest.approx(quantile(values, QUANTILES[stat]), rel=0.01)
        assert point["low_count"] == (len(values) < min_samples(QUANTILES[stat]))


async def test_series_of_tpot_over_rollups_matches_raw_samples(
        api: httpx.AsyncClient, app: FastAPI, seeded: int) -> None:
    r = await api.get(f"/api/v1/probes/{seeded}/series", params={
        "metric": "tpot", "stat": "p99", "step": "1d", "from": "2026-11-20T00:00:00Z",
        "to": "2026-11-22T00:00:00Z"})
    for point in r.json()["points"]:
        values = await exact(app, seeded, "tpot_ms", datetime.fromisoformat(point["start"]),
                             datetime.fromisoformat(point["end"]))
        assert point["value"] == pytest.approx(quantile(values, 0.99), rel=0.01)


async def test_windows_without_runs_are_absent_not_zero(
        api: httpx.AsyncClient, seeded: int) -> None:
    r = await api.get(f"/api/v1/probes/{seeded}/series", params={
        "stat": "availability", "step": "1h", "from": "2026-11-19T00:00:00Z",
        "to": "2026-11-23T00:00:00Z"})
    points = r.json()["points"]
    hours = {datetime.fromisoformat(p["start"]) for p in points}
    last = START + (RUNS - 1) * RUN_EVERY
    assert min(hours) == START.replace(minute=0)
    assert max(hours) == last.replace(minute=0)
    assert all(p["runs"] > 0 and p["count"] > 0 for p in points)


async def test_availability_and_throughput_are_computed_from_summed_counts(
        api: httpx.AsyncClient, app: FastAPI, seeded: int) -> None:
    state = runtime_of(app)
    (attempts, successes, measured), = await fetch(
        state.engine, "SELECT sum(attempts), sum(successes), sum(measured_s) FROM runs")
    r = await api.get(f"/api/v1/probes/{seeded}/summary", params={
        "window": "7d", "to": "2026-11-25T00:00:00Z"})
    body = r.json()
    assert (body["runs"], body["attempts"], body["successes"]) == (RUNS, attempts, successes)
    assert body["availability"] == pytest.approx(successes / attempts)
    assert body["requests_per_second"] == pytest.approx(successes / measured)
    values = await exact(app, seeded, "e2e_ms", START, START + RUNS * RUN_EVERY)
    e2e = body["metrics"]["e2e"]
    assert e2e["count"] == len(values)
    assert e2e["p99"] == pytest.approx(quantile(values, 0.99), rel=0.01)
    assert e2e["max"] == max(values)
    assert e2e["low_count"] == [stat for stat, q in QUANTILES.items()
                                if len(values) < min_samples(q)]
    stable = body["stability"]
    assert set(stable) == {"ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99",
                           "output_token_throughput"}
    runs = await fetch(state.engine, "SELECT id FROM runs ORDER BY scheduled_for")
    p50s = [quantile(await run_values(app, run_id, "ttft_ms"), 0.5) for (run_id,) in runs]
    mean = sum(p50s) / len(p50s)
    sd = (sum((v - mean) ** 2 for v in p50s) / (len(p50s) - 1)) ** 0.5
    assert stable["ttft_p50"]["runs"] == RUNS
    assert stable["ttft_p50"]["cov"] == pytest.approx(sd / mean, rel=0.05)  # sketches: ~1 %
    assert stable["ttft_p50"]["band"] in ("excellent", "good", "fair", "unstable")


async def run_values(app: FastAPI, run_id: int, column: str) -> list[float]:
    rows = await fetch(runtime_of(app).engine, f"SELECT {column} FROM samples WHERE "
                       f"run_id = :r AND outcome = 'success' AND {column} IS NOT NULL "
                       f"ORDER BY {column}", r=run_id)
    return [float(v) for (v,) in rows]


async def test_a_summary_window_cut_mid_hour_counts_only_runs_inside_it(
        api: httpx.AsyncClient, app: FastAPI, seeded: int) -> None:
    start = START + timedelta(hours=5, minutes=7)
    end = START + timedelta(days=1, hours=3, minutes=41)
    r = await api.get(f"/api/v1/probes/{seeded}/summary", params={
        "window": f"{int((end - start).total_seconds())}s", "to": end.isoformat()})
    runs_inside = sum(1 for i in range(RUNS) if start <= START + i * RUN_EVERY < end)
    body = r.json()
    assert body["runs"] == runs_inside
    values = await exact(app, seeded, "ttft_ms", start, end)
    assert body["metrics"]["ttft"]["p90"] == pytest.approx(quantile(values, 0.9), rel=0.01)


@pytest.mark.parametrize(("params", "field"), [
    ({"metric": "vibes"}, "query.metric"),
    ({"stat": "p42"}, "query.stat"),
    ({"from": "2026-12-02T00:00:00Z", "to": "2026-12-01T00:00:00Z"}, "query.from"),
    ({"from": "2020-01-01T00:00:00Z", "to": "2026-12-01T00:00:00Z", "step": "1h"},
     "query.step"),
    ({"step": "soon"}, "query.step"),
    ({"step": "0s"}, "query.step"),
    ({"to": "not-a-time"}, "query.to"),
])
async def test_bad_series_parameters_answer_422_naming_them(
        api: httpx.AsyncClient, app: FastAPI, params: dict[str, Any], field: str) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine)
    r = await api.get(f"/api/v1/probes/{probe_id}/series", params=params)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert field in [e["field"] for e in r.json()["errors"]]


@pytest.mark.parametrize("window", ["forever", "401d", "0d"])
async def test_bad_summary_windows_answer_422(api: httpx.AsyncClient, app: FastAPI,
                                              window: str) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine)
    r = await api.get(f"/api/v1/probes/{probe_id}/summary", params={"window": window})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "query.window"


async def test_history_of_an_unknown_probe_is_404(api: httpx.AsyncClient) -> None:
    assert (await api.get("/api/v1/probes/424242/series")).status_code == 404
    assert (await api.get("/api/v1/probes/424242/summary")).status_code == 404
