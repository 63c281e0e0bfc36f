"""SLO burn alerts in Postgres: two replicas evaluating the same moment record each
transition, and owe its notification, exactly once; healed, the alert resolves once."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import httpx
from fastapi import FastAPI

from sustain.service.alerting.evaluator import AlertEvaluator
from sustain.service.app import runtime_of
from sustain.service.runtime import Replica
from tests.integration.service.helpers import samples_of
from tests.integration.service.storage import create_probe_rows, fetch, seed_run, synthetic_samples


async def burning_hour(state: Replica, probe_id: int, now: datetime, seed: int,
                       last_minutes_ago: int = 4) -> None:
    """Runs every 5 minutes over the hour before `now`, a third of each run's requests failed
    (burn rate 33x at objective 0.99: every default tier breached)."""
    rng = random.Random(seed)
    for i in range(12):
        at = now - timedelta(minutes=last_minutes_ago + 55 - 5 * i)
        await seed_run(state.engine, probe_id, at, synthetic_samples(60, at, rng, fail_every=3))


async def test_two_replicas_fire_and_resolve_each_tier_once(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine)
    r = await api.post("/api/v1/slos", json={
        "name": "avail", "probes": ["p1"], "sli": {"kind": "availability"},
        "objective": 0.99, "window": "7d"})
    assert r.status_code == 201, r.text
    now = datetime.now(UTC)
    await burning_hour(state, probe_id, now, seed=2)

    replicas = [AlertEvaluator(state.sessions, f"r{i}", interval_s=60, repeat_s=None)
                for i in range(2)]
    results = await asyncio.gather(*(e.evaluate_once(now) for e in replicas))
    fired = [t for notified in results for _, t in notified]
    # burn rate 33x: every tier's windows have traffic and burn over its factor
    assert sorted(fired) == ["firing"] * 4
    events = await fetch(state.engine, "SELECT transition, count(*) FROM alert_events "
                                       "GROUP BY transition")
    assert events == [("firing", 4)]
    (owed,), = await fetch(state.engine, "SELECT count(*) FROM notifications")
    assert owed == 4

    listed = (await api.get("/api/v1/alerts", params={"state": "firing"})).json()["items"]
    assert sorted(a["labels"]["tier"] for a in listed) == [
        "page_fast", "page_slow", "ticket_fast", "ticket_slow"]
    assert all(a["fired_at"] is not None for a in listed)
    history = (await api.get("/api/v1/alerts/history")).json()["items"]
    assert [h["transition"] for h in history] == ["firing"] * 4
    metrics = samples_of((await api.get("/metrics")).text)
    assert ({"alertname": "SustainSloBurnRate", "severity": "page", "state": "firing"}, 2.0) \
        in metrics["sustain_alerts"]

    again = await asyncio.gather(*(e.evaluate_once(now + timedelta(seconds=30))
                                   for e in replicas))
    assert [t for n in again for _, t in n] == [], "still firing: nothing new to say"

    later = now + timedelta(days=4)  # every window has gone quiet
    results = await asyncio.gather(*(e.evaluate_once(later) for e in replicas))
    assert sorted(t for n in results for _, t in n) == ["resolved"] * 4
    rows = await fetch(state.engine, "SELECT state FROM alerts")
    assert {s for (s,) in rows} == {"resolved"}
    (payload,), = (await fetch(state.engine, "SELECT payload FROM notifications "
                                             "WHERE transition = 'resolved' LIMIT 1"))
    assert payload["status"] == "resolved"
    assert payload["labels"]["alertname"] == "SustainSloBurnRate"
    assert payload["endsAt"] is not None


async def test_a_tier_with_a_hold_is_pending_until_it_has_held(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine)
    r = await api.post("/api/v1/slos", json={
        "name": "held", "probes": ["p1"], "sli": {"kind": "availability"},
        "objective": 0.99, "window": "7d", "tiers": [
            {"name": "page_fast", "severity": "page", "factor": 14.4, "long_window_s": 3600,
             "short_window_s": 300, "for_s": 60}]})
    assert r.status_code == 201, r.text
    assert r.json()["tiers"][0]["for_s"] == 60
    now = datetime.now(UTC)
    await burning_hour(state, probe_id, now, seed=4, last_minutes_ago=3)
    evaluator = AlertEvaluator(state.sessions, "r1", interval_s=60, repeat_s=None)
    assert await evaluator.evaluate_once(now) == []
    assert [a["state"] for a in (await api.get("/api/v1/alerts")).json()["items"]] == ["pending"]
    assert await evaluator.evaluate_once(now + timedelta(seconds=30)) == []
    fired = await evaluator.evaluate_once(now + timedelta(seconds=60))
    assert [t for _, t in fired] == ["firing"]
