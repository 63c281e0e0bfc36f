"""SLOs over locations: an SLO is judged across locations or in each, paging in each mode
only when at least `min_locations` locations breach a tier; its status shows every location
on its own, and a burn-rate alert says which locations breach."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import httpx
from fastapi import FastAPI

from sustain.service.app import runtime_of
from tests.integration.service.storage import create_probe_rows, seed_run, synthetic_samples


async def seed_two_locations(app: FastAPI) -> None:
    """Ten runs in each of two locations over the last three hours: `near` fails 1 request
    in 50, `far` 1 in 2."""
    engine = runtime_of(app).engine
    probe_id = await create_probe_rows(engine)
    rng = random.Random(5)
    start = datetime.now(UTC) - timedelta(hours=3)
    for i in range(10):
        at = start + i * timedelta(minutes=18)
        await seed_run(engine, probe_id, at, synthetic_samples(100, at, rng, fail_every=50),
                       location="near")
        await seed_run(engine, probe_id, at, synthetic_samples(100, at, rng, fail_every=2),
                       location="far")


async def make_slo(api: httpx.AsyncClient, name: str, **locations: object) -> int:
    body: dict[str, object] = {"name": name, "probes": ["p1"], "objective": 0.9,
                               "window": "7d", "sli": {"kind": "availability"}}
    if locations:
        body["locations"] = locations
    r = await api.post("/api/v1/slos", json=body)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


async def test_an_slo_is_judged_across_locations_or_in_n_of_them(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    await seed_two_locations(app)
    across = await make_slo(api, "across")  # counted from the stored runs at once
    one = await make_slo(api, "one-of-two", mode="each", min_locations=1)
    both = await make_slo(api, "two-of-two", mode="each", min_locations=2)

    status = {slo: (await api.get(f"/api/v1/slos/{slo}/status")).json()
              for slo in (across, one, both)}
    whole = status[across]
    assert whole["total"] == 2000
    assert whole["good"] == 2000 - 20 - 500
    assert set(whole["locations"]) == {"near", "far"}
    near, far = whole["locations"]["near"], whole["locations"]["far"]
    assert (near["total"], near["good"]) == (1000, 980)
    assert (far["total"], far["good"]) == (1000, 500)
    assert near["breached_tiers"] == []
    assert far["breached_tiers"], "half failing burns any tier's budget"
    assert whole["breached_tiers"], "across: 26 % failing breaches a 90 % objective"
    assert status[one]["breached_tiers"] == far["breached_tiers"], "one location is enough"
    assert status[both]["breached_tiers"] == [], "one location breaching of two does not page"
    assert status[both]["locations"] == whole["locations"]

    read = (await api.get(f"/api/v1/slos/{both}")).json()
    assert read["locations"] == {"mode": "each", "min_locations": 2}
    patched = await api.patch(f"/api/v1/slos/{both}", json={
        "locations": {"mode": "each", "min_locations": 1}})
    assert patched.status_code == 200, patched.text
    assert (await api.get(f"/api/v1/slos/{both}/status")).json()["breached_tiers"] == \
        far["breached_tiers"]

    candidates = await runtime_of(app).alerts.candidates(datetime.now(UTC))
    burning = [c for c in candidates if c.alertname == "SustainSloBurnRate" and c.condition]
    assert {c.labels["slo"] for c in burning} == {"across", "one-of-two", "two-of-two"}
    assert {c.annotations["locations"] for c in burning} == {"far"}, \
        "the alert says which location breaches"
    assert all("breaching in far" in c.annotations["description"] for c in burning)


async def test_min_locations_is_bounded(api: httpx.AsyncClient, app: FastAPI) -> None:
    await create_probe_rows(runtime_of(app).engine)
    for bad in ({"mode": "each", "min_locations": 0}, {"mode": "each", "min_locations": 17},
                {"mode": "somewhere"}):
        r = await api.post("/api/v1/slos", json={
            "name": "s", "probes": ["p1"], "objective": 0.9, "sli": {"kind": "availability"},
            "locations": bad})
        assert r.status_code == 422, r.text
        assert "locations" in r.text
    assert (await api.get("/api/v1/slos")).json()["items"] == [], "nothing stored"
