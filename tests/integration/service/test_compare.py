"""Probes side by side: GET /api/v1/compare over stored runs, and `sustain
compare` over the same database."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI

from sustain.service.app import runtime_of
from tests.integration.service.storage import create_probe_rows, seed_run, synthetic_samples
from tests.processes import sustain_command

END = datetime(2026, 12, 4, 0, 0, tzinfo=UTC)


def cli(database_url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*sustain_command(), "compare", "vllm-a", "sglang-b", "--window", "400d", *flags],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "SUSTAIN_DATABASE_URL": database_url})


async def seed(app: FastAPI, name: str, ttft_scale: float) -> None:
    state = runtime_of(app)
    probe_id = await create_probe_rows(state.engine, name)
    rng = random.Random(name)
    for hour in range(6):
        at = END - timedelta(hours=6 - hour)
        await seed_run(state.engine, probe_id, at,
                       synthetic_samples(100, at, rng, ttft_scale=ttft_scale))


async def test_two_probes_side_by_side(api: httpx.AsyncClient, app: FastAPI,
                                       database_url: str) -> None:
    await seed(app, "vllm-a", 1.0)
    await seed(app, "sglang-b", 2.0)
    r = await api.get("/api/v1/compare", params={
        "probe": ["vllm-a", "sglang-b"], "window": "1d", "to": END.isoformat()})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["from"] == (END - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    a, b = body["probes"]
    assert (a["probe"], b["probe"]) == ("vllm-a", "sglang-b")
    assert a["runs"] == b["runs"] == 6
    assert b["ttft_ms"]["p50"] == pytest.approx(2 * a["ttft_ms"]["p50"], rel=0.1)
    assert a["stability"]["ttft_p50"]["band"] is not None
    assert a["capacity"] is None
    assert a["pareto"] is None

    for params, problem in ((["vllm-a", "nope"], "no probe named 'nope'"),
                            (["vllm-a", "vllm-a"], "named twice")):
        r = await api.get("/api/v1/compare", params={"probe": params})
        assert r.status_code == 422
        assert problem in r.text

    done = await asyncio.to_thread(cli, database_url, "--json")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert [p["probe"] for p in printed["probes"]] == ["vllm-a", "sglang-b"]
    assert printed["probes"][1]["ttft_ms"]["p50"] == b["ttft_ms"]["p50"]
    table = await asyncio.to_thread(cli, database_url)
    assert table.returncode == 0, table.stderr
    assert "vllm-a" in table.stdout
    assert "TTFT p50 / p99" in table.stdout
    drift = next(line for line in table.stdout.splitlines() if "drift" in line)
    assert drift.count("not enough runs yet") == 2, drift


async def test_the_compare_page_shows_probes_side_by_side(api: httpx.AsyncClient,
                                                          app: FastAPI) -> None:
    await seed(app, "vllm-a", 1.0)
    await seed(app, "sglang-b", 2.0)
    page = await api.get("/compare", params={"probe": ["vllm-a", "sglang-b"],
                                             "window": "400d"})
    assert page.status_code == 200, page.text
    assert 'data-probe="vllm-a"' in page.text
    assert 'data-probe="sglang-b"' in page.text
    assert "<script" not in page.text
    drift_row = page.text[page.text.index("<th>drift</th>"):].split("</tr>", 1)[0]
    assert drift_row.count("not checked: the probe is disabled") == 2, \
        "no drift finding yet is not a no: the page says why there is none"
    assert "no change" not in drift_row
    bad = await api.get("/compare", params={"probe": ["vllm-a", "nope"]})
    assert bad.status_code == 422
    assert "no probe named &#39;nope&#39;" in bad.text
