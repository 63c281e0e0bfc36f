"""/api/v1/slos on real Postgres: every run is counted for every SLO covering it (exactly,
from raw samples, when the run is written, or when the SLO is created later), old runs from
sketches (flagged approximate), and the status figures follow the counts."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI

from sustain.probes.measure.sample import Sample
from sustain.service.app import create_app, runtime_of
from tests.integration.service.helpers import app_settings, samples_of, serving
from tests.integration.service.storage import create_probe_rows, fetch, seed_run, synthetic_samples

LATENCY = {"kind": "latency", "metric": "ttft", "threshold_ms": 60.0}


def exact_latency(samples: list[Sample], threshold: float) -> tuple[int, int]:
    values = [s.measurement.ttft_ms for s in samples
              if s.measurement.error_class is None and s.measurement.ttft_ms is not None]
    return sum(1 for v in values if v <= threshold), len(values)


async def seed(app: FastAPI, probe_id: int, start: datetime, runs: int, every: timedelta,
               fail_every: int = 10) -> list[list[Sample]]:
    state = runtime_of(app)
    rng = random.Random(11)
    out = []
    for i in range(runs):
        at = start + i * every
        samples = synthetic_samples(100, at, rng, fail_every=fail_every)
        await seed_run(state.engine, probe_id, at, samples)
        out.append(samples)
    return out


async def slo(api: httpx.AsyncClient, **fields: object) -> dict[str, object]:
    body = {"name": "s", "probes": ["p1"], "objective": 0.99, "window": "7d"} | fields
    r = await api.post("/api/v1/slos", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


async def test_runs_written_after_the_slo_are_counted_exactly(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine)
    availability = await slo(api, name="avail", sli={"kind": "availability"})
    latency = await slo(api, name="ttft", sli=LATENCY)
    start = datetime.now(UTC) - timedelta(hours=3, minutes=1)
    runs = await seed(app, probe_id, start, runs=10, every=timedelta(minutes=20))

    rows = await fetch(state.engine, "SELECT slo_id, sum(good), sum(total), bool_or(approximate)"
                                     " FROM slo_run_counts GROUP BY slo_id")
    counts = {slo_id: (good, total, approx) for slo_id, good, total, approx in rows}
    attempts = sum(len(r) for r in runs)
    failures = sum(1 for r in runs for s in r if s.measurement.error_class is not None)
    assert counts[availability["id"]] == (attempts - failures, attempts, False)
    good, total = map(sum, zip(*(exact_latency(r, 60.0) for r in runs), strict=True))
    assert counts[latency["id"]] == (good, total, False)

    r = await api.get(f"/api/v1/slos/{availability['id']}/status")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["total"] == attempts
    assert body["compliance"] == pytest.approx((attempts - failures) / attempts)
    assert body["budget_remaining"] == pytest.approx(1 - (failures / attempts) / 0.01)
    by_window = {w["window_s"]: w for w in body["windows"]}
    assert by_window[300]["total"] == len(runs[-1]), "only the newest run is that recent"
    assert by_window[86400]["burn_rate"] == pytest.approx((failures / attempts) / 0.01)
    burn = (failures / attempts) / 0.01  # 10x: over 6x and 3x, under 14.4x
    assert burn == pytest.approx(10.0, rel=0.2)
    assert body["breached_tiers"] == ["page_slow", "ticket_fast", "ticket_slow"]
    assert body["approximate"] is False

    metrics = samples_of((await api.get("/metrics")).text)
    assert ({"slo": "avail"}, 0.99) in metrics["sustain_slo_objective_ratio"]
    assert ({"slo": "avail", "outcome": "good"}, attempts - failures) in \
        metrics["sustain_slo_events_total"]
    assert ({"slo": "avail", "outcome": "bad"}, failures) in metrics["sustain_slo_events_total"]
    burn_by_window = {labels["window"]: v for labels, v in metrics["sustain_slo_burn_rate"]
                      if labels["slo"] == "avail"}
    assert burn_by_window["1d"] == pytest.approx(by_window[86400]["burn_rate"])
    assert set(burn_by_window) == {"5m", "30m", "1h", "2h", "6h", "1d", "3d", "7d"}


async def test_an_slo_created_later_is_backfilled_and_recounted_when_changed(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine)
    runs = await seed(app, probe_id, datetime.now(UTC) - timedelta(hours=3), runs=6,
                      every=timedelta(minutes=15))
    created = await slo(api, sli=LATENCY)
    (good, total), = await fetch(state.engine, "SELECT sum(good), sum(total) FROM "
                                 "slo_run_counts WHERE slo_id = :s", s=created["id"])
    exact = [exact_latency(r, 60.0) for r in runs]
    assert (good, total) == (sum(g for g, _ in exact), sum(t for _, t in exact))

    r = await api.patch(f"/api/v1/slos/{created['id']}",
                        json={"sli": {"kind": "latency", "metric": "ttft", "threshold_ms": 45}})
    assert r.status_code == 200, r.text
    (good, total), = await fetch(state.engine, "SELECT sum(good), sum(total) FROM "
                                 "slo_run_counts WHERE slo_id = :s", s=created["id"])
    exact = [exact_latency(r, 45.0) for r in runs]
    assert (good, total) == (sum(g for g, _ in exact), sum(t for _, t in exact))


@pytest.fixture
def retaining_14_days(database_url: str) -> FastAPI:
    """The app with the default 14-day sample retention (test apps otherwise keep raw samples
    ten years)."""
    return create_app(app_settings(database_url, auto_migrate=False, sample_retention_days=14))


async def test_runs_past_sample_retention_are_counted_from_sketches(
        retaining_14_days: FastAPI) -> None:
    app = retaining_14_days
    async with serving(app) as api:
        await _counted_from_sketches(api, app)


async def _counted_from_sketches(api: httpx.AsyncClient, app: FastAPI) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine)
    old = datetime.now(UTC) - timedelta(days=20)
    runs = await seed(app, probe_id, old, runs=4, every=timedelta(hours=1))
    created = await slo(api, sli=LATENCY, window="28d")
    rows = await fetch(state.engine, "SELECT good, total, approximate FROM slo_run_counts "
                                     "WHERE slo_id = :s ORDER BY run_id", s=created["id"])
    assert [approx for _, _, approx in rows] == [True] * 4
    for (good, total, _), samples in zip(rows, runs, strict=True):
        exact_good, exact_total = exact_latency(samples, 60.0)
        assert total == exact_total
        assert abs(good - exact_good) <= max(2, 0.02 * exact_total)
    status = (await api.get(f"/api/v1/slos/{created['id']}/status")).json()
    assert status["approximate"] is True


async def test_an_slo_without_traffic_has_no_figures(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    state = runtime_of(app)
    await create_probe_rows(state.engine)
    created = await slo(api, sli={"kind": "goodput"})
    body = (await api.get(f"/api/v1/slos/{created['id']}/status")).json()
    assert (body["total"], body["compliance"], body["budget_remaining"]) == (0, None, None)
    assert all(w["burn_rate"] is None for w in body["windows"])
    assert body["breached_tiers"] == []
    metrics = samples_of((await api.get("/metrics")).text)
    assert metrics["sustain_slo_objective_ratio"] == [({"slo": "s"}, 0.99)]
    assert "sustain_slo_burn_rate" not in metrics, "no events: absent, never NaN"
    assert "sustain_slo_error_budget_remaining_ratio" not in metrics


@pytest.mark.parametrize(("body", "field"), [
    ({"sli": {"kind": "latency", "metric": "ttft"}}, "sli"),
    ({"sli": {"kind": "availability"}, "probes": []}, "body"),
    ({"sli": {"kind": "availability"}, "objective": 1.0}, "objective"),
    ({"sli": {"kind": "availability"}, "window": "1y"}, "window"),
    ({"sli": {"kind": "availability"}, "tiers": [
        {"name": "x", "severity": "page", "factor": 2, "long_window_s": 60,
         "short_window_s": 600}]}, "tiers.0"),
])
async def test_bad_slos_are_refused_naming_the_field(
        api: httpx.AsyncClient, body: dict[str, object], field: str) -> None:
    full = {"name": "bad", "probes": ["p1"], "objective": 0.99} | body
    r = await api.post("/api/v1/slos", json=full)
    assert r.status_code == 422, r.text
    assert any(e["field"].startswith(field) for e in r.json()["errors"]), r.json()


async def test_an_slo_naming_unknown_probes_is_422_naming_each_and_never_stored(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    await create_probe_rows(runtime_of(app).engine)
    r = await api.post("/api/v1/slos", json={
        "name": "s", "probes": ["nope", "p1", "gone"], "sli": {"kind": "availability"},
        "objective": 0.99})
    assert r.status_code == 422, r.text
    assert r.json()["errors"] == [{"field": "probes.0", "message": "no probe named 'nope'"},
                                  {"field": "probes.2", "message": "no probe named 'gone'"}]
    assert (await api.get("/api/v1/slos")).json()["items"] == []

    created = await slo(api, sli={"kind": "availability"})
    r = await api.patch(f"/api/v1/slos/{created['id']}", json={"probes": ["p1", "nope"]})
    assert r.status_code == 422, r.text
    assert [e["field"] for e in r.json()["errors"]] == ["probes.1"]
    assert (await api.get(f"/api/v1/slos/{created['id']}")).json()["probes"] == ["p1"]
