"""The site's pages never look broken: a 404 page with the navigation for an unknown page (the
API keeps problem+json), compare that asks for two probes and keeps its picker, a failed run
that says what the server said, drift that names the window it lacks, the key a person is
signed in with, figures marked where they are not what they seem (tests/browser walks them in
Chromium)."""

from __future__ import annotations

import random
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.probes.measure.sample import ErrorClass
from sustain.service.alerting import drift_findings
from sustain.service.app import runtime_of
from sustain.service.config import Settings
from sustain.service.db.engine import session_factory
from sustain.service.web.drift_view import drift_text
from tests.integration.service.storage import (
    create_probe_rows,
    seed_run,
    synthetic_samples,
)
from tests.processes import TEST_ADMIN_KEY

HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
"""What a browser asks for when it opens a page."""
WATCHED = [("ttft", "p99"), ("e2e", "p99")]


def has_site_navigation(html: str) -> bool:
    return '<nav class="site" aria-label="Site">' in html and 'href="/compare"' in html


async def enable(engine: AsyncEngine, probe_id: int) -> None:
    async with engine.begin() as connection:
        await connection.execute(text("UPDATE probes SET enabled = true WHERE id = :p"),
                                 {"p": probe_id})


@pytest.mark.parametrize("path", ["/no-such-page", "/probes/999999", "/probes/abc",
                                  "/runs/0", "/runs/999999", "/runs/99999999999999999999"])
async def test_an_unknown_page_is_a_404_page_with_the_site_navigation(
        api: httpx.AsyncClient, path: str) -> None:
    page = await api.get(path, headers=HTML)
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert has_site_navigation(page.text)
    assert "<h1>Not found</h1>" in page.text
    assert '<a href="/">Back to the status page</a>' in page.text
    assert "<script" not in page.text


async def test_the_api_and_scripts_keep_problem_json_for_what_does_not_exist(
        api: httpx.AsyncClient) -> None:
    for path, headers in (("/api/v1/no-such-thing", HTML), ("/api/v1/probes/999999", HTML),
                          ("/no-such-page", {"Accept": "application/json"}),
                          ("/no-such-page", {})):
        answer = await api.get(path, headers=headers)
        assert answer.status_code == 404, path
        assert answer.headers["content-type"] == "application/problem+json", (path, headers)
        assert answer.json()["status"] == 404
    posted = await api.post("/no-such-page", headers=HTML)
    assert posted.headers["content-type"] == "application/problem+json", "a page is a GET"


async def test_signed_in_names_the_key_never_the_environment_variable(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    created = await api.post("/api/v1/keys", json={"name": "ops-alice", "role": "viewer"})
    assert created.status_code == 201, created.text
    stored_key = created.json()["key"]
    for key, expected in ((TEST_ADMIN_KEY, f"the admin key {TEST_ADMIN_KEY[:17]}…"),
                          (stored_key, "ops-alice")):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url=str(api.base_url)) as browser:
            signed = await browser.post("/login", data={"key": key})
            assert signed.status_code == 303, signed.text
            nav = (await browser.get("/")).text.split("</nav>", 1)[0]
            assert f'<span class="who">signed in as {expected}</span>' in nav
            assert "SUSTAIN_ADMIN_KEY" not in nav
            missing = await browser.get("/no-such-page", headers=HTML)
            assert f"signed in as {expected}" in missing.text, "the 404 page knows you too"
    assert TEST_ADMIN_KEY not in (await api.get("/")).text, "never the whole key"


async def test_compare_asks_for_two_probes_and_keeps_its_picker_with_the_result(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    engine = runtime_of(app).engine
    for name in ("alpha", "beta"):
        probe_id = await create_probe_rows(engine, name)
        at = datetime.now(UTC) - timedelta(minutes=30)
        await seed_run(engine, probe_id, at, synthetic_samples(20, at, random.Random(name)))
    one = await api.get("/compare", params={"probe": "alpha"})
    assert one.status_code == 422
    assert "Pick at least two probes" in one.text
    assert "<table" not in one.text, "no table of one column"
    assert re.search(r'value="alpha" checked', one.text), "the pick is kept to add to"
    both = await api.get("/compare", params={"probe": ["alpha", "beta"], "window": "24h"})
    assert both.status_code == 200
    assert both.text.count("<th data-probe=") == 2
    picker = both.text[both.text.index('<form method="get" action="/compare"'):]
    assert "Compare other probes" in picker
    assert re.search(r'value="alpha" checked', picker)
    assert re.search(r'value="beta" checked', picker)
    assert re.search(r'<option selected>24h</option>', picker)


async def test_a_failed_runs_page_says_what_the_server_said_and_where(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    engine = runtime_of(app).engine
    probe_id = await create_probe_rows(engine, "wrong-model")
    at = datetime.now(UTC) - timedelta(minutes=5)
    words = "HTTP 404: The model `m` does not exist."
    samples = [replace(s, measurement=replace(
        s.measurement, ttft_ms=None, itl_ms=(), output_tokens=0, http_status=404,
        error_class=ErrorClass.HTTP_4XX, error_detail=words))
        for s in synthetic_samples(6, at, random.Random(1))]
    run_id = await seed_run(engine, probe_id, at, samples)
    page = await api.get(f"/runs/{run_id}")
    assert page.status_code == 200
    failure = page.text[page.text.index('<section class="failure"'):].split("</section>")[0]
    assert ("6 of 6 requests failed (http_4xx 6); the first: http_4xx (HTTP 404) from POST "
            "http://127.0.0.1:9/v1/chat/completions: The model `m` does not exist.") in failure
    assert "does not serve model &#39;m&#39;" in failure, "the hint names the endpoint's model"


async def test_the_probe_page_names_the_window_its_drift_lacks(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    engine = runtime_of(app).engine
    probe_id = await create_probe_rows(engine, "young")
    await enable(engine, probe_id)
    now = datetime.now(UTC)
    for minutes in range(10, 70, 10):
        at = now - timedelta(minutes=minutes)
        await seed_run(engine, probe_id, at, synthetic_samples(10, at, random.Random(minutes)))
    await drift_findings.refresh(session_factory(engine), now, timedelta(days=1),
                                 timedelta(days=7), WATCHED, timedelta(0))
    page = (await api.get(f"/probes/{probe_id}")).text
    drift = re.search(r'<dd class="drift">([^<]*)</dd>', page)
    assert drift is not None
    assert drift.group(1) == ("no runs in the 7-day baseline window yet (the 7 days before "
                              "the last 24 hours)"), "six runs, all recent: no baseline"


async def test_drift_words_say_why_each_probe_has_no_verdict(engine: AsyncEngine) -> None:
    settings = Settings(drift_window="24h", drift_baseline="7d", drift_evaluation_s=300)
    now = datetime.now(UTC)
    sessions = session_factory(engine)
    unchecked = await create_probe_rows(engine, "unchecked")
    await enable(engine, unchecked)
    async with sessions() as session:
        assert await drift_text(session, unchecked, True, settings) == (
            "not checked yet: drift is checked every 5 minutes")
        assert await drift_text(session, unchecked, False, settings) == (
            "not checked: the probe is disabled")
    settled = await create_probe_rows(engine, "settled")
    await enable(engine, settled)
    for hours in range(30, 100, 10):  # seven runs in the baseline window
        at = now - timedelta(hours=hours)
        await seed_run(engine, settled, at, synthetic_samples(10, at, random.Random(hours)))
    for hours in (2, 5):  # two in the recent one
        at = now - timedelta(hours=hours)
        await seed_run(engine, settled, at, synthetic_samples(10, at, random.Random(hours)))
    failing = await create_probe_rows(engine, "failing")
    await enable(engine, failing)
    for hours in range(30, 100, 10):
        at = now - timedelta(hours=hours)
        await seed_run(engine, failing, at,
                       synthetic_samples(4, at, random.Random(hours), fail_every=1))
    await drift_findings.refresh(sessions, now, timedelta(days=1), timedelta(days=7), WATCHED,
                                 timedelta(0))
    async with sessions() as session:
        assert await drift_text(session, settled, True, settings) == (
            "2 runs with a successful request in the last 24 hours; 5 needed")
        assert await drift_text(session, failing, True, settings) == (
            "no run in the 7-day baseline window had a successful request (the 7 days before "
            "the last 24 hours)")


async def test_the_status_page_marks_low_count_p99s_and_a_capacity_probes_figures(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    engine = runtime_of(app).engine
    probe_id = await create_probe_rows(engine, "search")
    async with engine.begin() as connection:
        await connection.execute(text(
            "UPDATE probes SET enabled = true, profile = '{\"kind\": \"capacity\", "
            "\"minimum\": 1, \"maximum\": 8, \"duration_s\": 2}' WHERE id = :p"),
            {"p": probe_id})
    at = datetime.now(UTC) - timedelta(minutes=20)
    await seed_run(engine, probe_id, at, synthetic_samples(40, at, random.Random(4)))
    page = (await api.get("/")).text
    row = page[page.index('<tr class="probe" data-probe="search">'):].split("</tr>")[0]
    assert row.count('<sup class="all-levels"') == 3, "availability, TTFT and E2E"
    assert "take in every load level, the saturated ones past its capacity too" in row
    assert re.search(r"\d ms\*<sup", row), "40 samples cannot bound a p99"
    assert "* too few samples for a 99 % confidence bound on this percentile" in page


async def test_the_docs_page_links_back_to_the_status_page(api: httpx.AsyncClient) -> None:
    page = await api.get("/docs")
    assert page.status_code == 200
    assert re.search(r'<nav aria-label="Site"[^>]*><a href="/"[^>]*>&larr; sustain status page'
                     r'</a></nav>', page.text)
    assert page.text.index('href="/"') < page.text.index('id="swagger-ui"')
