"""GET / renders the status page from stored runs, SLOs and alerts (the browser test in
tests/browser checks it in Chromium)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import text

from sustain.service.app import runtime_of
from tests.integration.service.storage import create_probe_rows, seed_run, synthetic_samples


async def test_status_page_lists_probes_with_their_figures_slos_and_charts(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    empty = await api.get("/")
    assert empty.status_code == 200
    assert "No probes yet" in empty.text
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine, "chat")
    async with state.engine.begin() as connection:
        await connection.execute(text("UPDATE probes SET enabled = true WHERE id = :p"),
                                 {"p": probe_id})
    now = datetime.now(UTC)
    rng = random.Random(5)
    for minutes in (150, 90, 30, 1):
        at = now - timedelta(minutes=minutes)
        newest = synthetic_samples(40, at, rng, fail_every=10, canary_fail_every=4)
        await seed_run(state.engine, probe_id, at, newest)
    checked = [s.quality for s in newest if s.quality is not None]
    r = await api.post("/api/v1/slos", json={
        "name": "chat-avail", "probes": ["chat"], "sli": {"kind": "availability"},
        "objective": 0.95, "window": "1d"})
    assert r.status_code == 201, r.text
    page = await api.get("/")
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert 'data-probe="chat"' in html
    assert "90.00 %" in html, "availability over 24 h: 1 in 10 failed"
    assert html.count("<polyline") >= 2, "hourly p99 lines for TTFT and E2E"
    assert f"canaries {sum(checked)}/{len(checked)} passed" in html, "the newest run's canaries"
    assert 'data-slo="chat-avail"' in html
    assert "<script" not in html
    assert 'http-equiv="refresh"' in html
