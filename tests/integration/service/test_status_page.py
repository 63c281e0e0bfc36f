"""GET / renders the status page from stored runs, SLOs and alerts (the browser test in
tests/browser checks it in Chromium)."""

from __future__ import annotations

import random
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from sustain.service.app import create_app, runtime_of
from sustain.service.db.status import STATE_ORDER
from tests.integration.service.helpers import app_settings, serving
from tests.integration.service.storage import (
    create_probe_rows,
    create_run,
    seed_run,
    synthetic_samples,
)


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
    assert html.count('<path class="curve') >= 2, "hourly p99 lines for TTFT and E2E"
    assert "TTFT p99 (ms)" in html, "axes name their units"
    assert "E2E p99 (ms)" in html
    assert f"canaries {sum(checked)}/{len(checked)} passed" in html, "the newest run's canaries"
    assert 'data-slo="chat-avail"' in html
    assert "<script" not in html
    assert 'http-equiv="refresh"' in html


BULK_PROBES = 10_000


def bulk_state(i: int) -> str:
    """The state probe p{i:05} of the bulk set is put in (see bulk_status_data)."""
    if i % 1000 == 999:
        return "disabled"
    if i == 5001:
        return "down"
    if i % 50 == 7:
        return "failing"
    return "ok" if i % 2 == 0 else "waiting"


async def bulk_status_data(app: FastAPI) -> None:
    """BULK_PROBES probes in one statement each: disabled ones, a newest failed run or a
    succeeded one, one with a firing SustainEndpointDown alert, the rest never run; and 150
    firing burn-rate alerts."""
    now = datetime.now(UTC)
    async with runtime_of(app).engine.begin() as connection:
        endpoint = (await connection.execute(text(
            "INSERT INTO endpoints (name, base_url, api_kind, model, timeout_connect_s, "
            "timeout_first_token_s, timeout_total_s, tls_verify) VALUES "
            "('bulk', 'http://127.0.0.1:9/v1', 'openai-chat', 'm', 1, 1, 1, true) "
            "RETURNING id"))).scalar_one()
        await connection.execute(text(
            "INSERT INTO probes (name, endpoint_id, workload, profile, interval_seconds, enabled) "
            "SELECT format('p%s', lpad(i::text, 5, '0')), :e, '{}', '{\"kind\": \"single\"}', "
            "3600, i % 1000 <> 999 FROM generate_series(0, :n - 1) i"),
            {"e": endpoint, "n": BULK_PROBES})
        await connection.execute(text(
            "INSERT INTO runs (probe_id, trigger, scheduled_for, status, started_at, finished_at) "
            "SELECT id, 'manual', :at, CASE WHEN substr(name, 2)::int % 50 = 7 THEN 'failed' "
            "ELSE 'succeeded' END, :at, :at FROM probes "
            "WHERE substr(name, 2)::int % 50 = 7 OR substr(name, 2)::int % 2 = 0"),
            {"at": now - timedelta(minutes=5)})
        await connection.execute(text(
            "INSERT INTO alerts (fingerprint, alertname, labels, severity, state, active_since, "
            "fired_at) SELECT md5(i::text), CASE WHEN i = 0 THEN 'SustainEndpointDown' "
            "ELSE 'SustainSloBurnRate' END, CASE WHEN i = 0 THEN '{\"probe\": \"p05001\"}' "
            "ELSE jsonb_build_object('slo', 's' || i) END, 'page', 'firing', :at, :at "
            "FROM generate_series(0, 150) i"), {"at": now})


def probe_names(html: str) -> list[str]:
    return re.findall(r'<tr class="probe" data-probe="([^"]+)"', html)


def link(html: str, rel: str) -> str:
    found = re.search(rf'<a rel="{rel}" href="([^"]+)"', html)
    assert found is not None, f"no {rel} link"
    return found.group(1).replace("&amp;", "&")


@pytest.fixture
async def quiet_api(database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    """The app with its scheduler's and alert evaluator's periodic passes an hour apart: the
    bulk rows written behind its back stay as written while the test reads the page."""
    app = create_app(app_settings(database_url, auto_migrate=False, reconcile_s=3600,
                                  alert_evaluation_s=3600))
    async with serving(app) as client:
        yield client, app


async def test_status_page_with_ten_thousand_probes_is_one_bounded_page_with_totals(
        quiet_api: tuple[httpx.AsyncClient, FastAPI]) -> None:
    api, app = quiet_api
    await bulk_status_data(app)
    states = [bulk_state(i) for i in range(BULK_PROBES)]
    expected = {state: states.count(state) for state in set(states)}
    ordered = sorted((f"p{i:05}" for i in range(BULK_PROBES)),
                     key=lambda n: (STATE_ORDER.index(bulk_state(int(n[1:]))), n))

    page = await api.get("/")
    assert page.status_code == 200
    html = page.text
    assert len(page.content) < 1_000_000, "one page of probes, not all of them"
    assert "10,000 probes" in html
    for state, count in expected.items():
        assert re.search(rf'data-state="{state}"[^>]*>.*?</span> {count:,}</a>', html), state
    assert probe_names(html) == ordered[:100], "worst first: the down probe, then failing"
    assert html.count('<tr class="alert">') == 100
    assert "100 of 151 active alerts shown" in html

    later = ordered.index("p09998")
    assert later >= 100
    on_page = await api.get("/", params={"page": later // 100 + 1})
    assert on_page.status_code == 200
    assert "p09998" in probe_names(on_page.text)
    assert len(on_page.content) < 1_000_000
    last = await api.get(link(html, "last"))
    assert probe_names(last.text)[-1] == "p09999"
    assert link(last.text, "prev") == "/?page=99#probes"

    failing = await api.get(link(html, "next").replace("page=2", "state=failing&page=2"))
    names = probe_names(failing.text)
    assert len(names) == expected["failing"] - 100
    assert {bulk_state(int(n[1:])) for n in names} == {"failing"}


@pytest.mark.parametrize(("query", "field"), [({"page": "0"}, "query.page"),
                                              ({"page": "x"}, "query.page"),
                                              ({"state": "sleepy"}, "query.state")])
async def test_status_page_refuses_a_bad_page_or_state_naming_it(
        api: httpx.AsyncClient, query: dict[str, str], field: str) -> None:
    r = await api.get("/", params=query)
    assert r.status_code == 422
    assert r.headers["content-type"] == "application/problem+json"
    assert [e["field"] for e in r.json()["errors"]] == [field]


async def test_a_probe_of_several_locations_shows_each_side_by_side(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine, "everywhere")
    async with state.engine.begin() as connection:
        await connection.execute(text(
            "UPDATE probes SET enabled = true, locations = ARRAY['north', 'south', 'edge'] "
            "WHERE id = :p"), {"p": probe_id})
    rng = random.Random(9)
    at = datetime.now(UTC) - timedelta(minutes=5)
    north = await seed_run(state.engine, probe_id, at, synthetic_samples(10, at, rng),
                           location="north")
    south = await seed_run(state.engine, probe_id, at,
                           synthetic_samples(10, at, rng, fail_every=1), location="south")
    page = (await api.get("/")).text
    items = dict(re.findall(r'<li data-location="([a-z-]+)">(.*?)</li>', page, re.S))
    assert list(items) == ["edge", "north", "south"]
    assert f'href="/runs/{north}">succeeded' in items["north"]
    assert f'href="/runs/{south}">failed' in items["south"]
    assert "none yet" in items["edge"]


async def test_a_probe_page_shows_its_runs_charts_and_the_slos_that_cover_it(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine, "chat")
    other_id = await create_probe_rows(state.engine, "other")
    async with state.engine.begin() as connection:
        await connection.execute(text("UPDATE probes SET labels = '{\"team\": \"a\"}' "
                                      "WHERE id = :p"), {"p": probe_id})
    now = datetime.now(UTC)
    rng = random.Random(3)
    for minutes in (40, 20, 1):
        await seed_run(state.engine, probe_id, now - timedelta(minutes=minutes),
                       synthetic_samples(30, now - timedelta(minutes=minutes), rng))
    for name, selector in (("by-name", {"probes": ["chat"]}),
                           ("by-label", {"probe_labels": {"team": "a"}}),
                           ("elsewhere", {"probes": ["other"]})):
        made = await api.post("/api/v1/slos", json={
            "name": name, **selector, "sli": {"kind": "availability"}, "objective": 0.99,
            "window": "1d"})
        assert made.status_code == 201, made.text
    page = await api.get(f"/probes/{probe_id}", params={"window": "1h"})
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert "<h1>Probe chat</h1>" in html
    assert re.findall(r'data-slo="([^"]+)"', html) == ["by-name", "by-label"], \
        "the SLOs that cover it, by name or by label, and no other"
    assert html.count('class="run-row"') == 3
    assert html.count('<figure class="axis-chart">') >= 5, \
        "TTFT, TPOT, ITL, E2E and availability"
    for axis in ("TTFT (ms)", "TPOT (ms)", "ITL (ms)", "end-to-end latency (ms)"):
        assert axis in html
    assert '<dd class="drift">not checked: the probe is disabled</dd>' in html, \
        "drift names why it has no verdict"
    assert 'aria-current="true">1h<' in html
    fallback = await api.get(f"/probes/{probe_id}", params={"window": "forever"})
    assert 'aria-current="true">24h<' in fallback.text, "an unknown window reads as 24h"
    missing = await api.get("/probes/999999")
    assert missing.status_code == 404
    assert "There is no probe 999999." in missing.text
    assert 'aria-label="Site"' in missing.text, "a 404 page keeps the navigation"
    quiet = await api.get(f"/probes/{other_id}")
    assert "No runs yet" in quiet.text
    assert "No finished run in this window yet." in quiet.text, "empty charts say why"


async def test_latest_run_opens_the_newest_finished_runs_page(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    none_yet = await api.get("/runs/latest")
    assert none_yet.status_code == 404
    assert "No run has finished yet" in none_yet.text
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine, "chat")
    now = datetime.now(UTC)
    rng = random.Random(4)
    finished = await seed_run(state.engine, probe_id, now - timedelta(minutes=2),
                              synthetic_samples(10, now - timedelta(minutes=2), rng))
    await create_run(state.engine, probe_id, now, status="running")
    found = await api.get("/runs/latest", follow_redirects=False)
    assert found.status_code == 303
    assert found.headers["location"] == f"/runs/{finished}", "the running run is skipped"
    named = await api.get("/runs/latest", params={"probe": "chat"}, follow_redirects=False)
    assert named.headers["location"] == f"/runs/{finished}"
    assert (await api.get("/runs/latest", params={"probe": "nope"})).status_code == 404
