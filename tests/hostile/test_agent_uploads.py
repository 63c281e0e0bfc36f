"""Hostile agent uploads: an agent key that sends what no agent of ours would. Each bound is
asserted by what it holds down (bytes, rows, partitions, series, peak memory), never by time:
- a sample's ITL list, and every timing and count of a sample, within bounds (422 naming it);
- one upload's parts, and all the unfinished uploads of a key, within SUSTAIN_AGENT_UPLOAD_MAX_
  BYTES (413 / 409), and assembling an upload holds one part decoded at a time;
- samples inside the run's window, so an upload adds a partition or two, not hundreds;
- an unclaimed tick on the probe's schedule, not in the future, not too old, and at most one
  run per tick and location however many upload ids come for it;
- a summary true to its schema, its label names from closed sets, so /metrics cannot grow."""

from __future__ import annotations

import asyncio
import copy
import json
import struct
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import msgpack
import pytest
from ddsketch import DDSketch
from ddsketch.pb.proto import DDSketchProto
from fastapi import FastAPI
from sqlalchemy import text

from sustain.probes.measure.sketch import RELATIVE_ACCURACY
from sustain.service.agent.client import PART_BYTES, split_samples
from sustain.service.app import create_app, runtime_of
from sustain.service.db import partitions
from sustain.service.runs.upload import MAX_PART_SAMPLES
from tests.integration.service.helpers import (
    app_settings,
    create_endpoint,
    create_probe,
    serving,
)
from tests.integration.service.storage import fetch
from tests.integration.service.test_agents import (
    LOCATION,
    agent_key,
    part_body,
    recent_tick,
    spooled,
)

MiB = 1024 * 1024
PARTITIONS = ("SELECT count(*) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent "
              "WHERE p.relname = 'samples'")


async def setup(api: httpx.AsyncClient, base_url: str, **probe: Any
                ) -> tuple[dict[str, str], int]:
    """An agent key's upload headers and a probe of its location (every 60 s)."""
    key = await agent_key(api)
    endpoint = await create_endpoint(api, base_url, **probe.pop("endpoint", {}))
    created = await create_probe(api, endpoint["id"], enabled=False, interval_s=60,
                                 locations=[LOCATION], **probe)
    return ({"Authorization": f"Bearer {key}", "content-type": "application/msgpack"},
            int(created["id"]))


def whole(probe_id: int, tick: datetime | None = None, samples: int = 3,
          **change: Any) -> dict[str, Any]:
    """A one-part upload of a run at `tick`, as a map to spoil."""
    run = spooled(probe_id, tick or recent_tick(), samples)
    return {"upload_id": str(run.upload_id), "part": 0, "parts": 1, "probe_id": run.probe_id,
            "tick": run.tick, "run_id": None, "started_at": run.started_at, "dropped": 0,
            "samples": run.samples, "final": run.final, **change}


async def send(api: httpx.AsyncClient, headers: dict[str, str], body: dict[str, Any] | bytes
               ) -> httpx.Response:
    content = body if isinstance(body, bytes) else msgpack.packb(body, use_bin_type=True)
    return await api.post("/api/v1/agent/uploads", params={"agent": "a1"}, content=content,
                          headers=headers)


def fields(response: httpx.Response) -> set[str]:
    assert response.status_code == 422, response.text
    return {e["field"] for e in response.json()["errors"]}


async def nothing_written(app: FastAPI) -> None:
    engine = runtime_of(app).engine
    assert await fetch(engine, "SELECT count(*) FROM runs") == [(0,)]
    assert await fetch(engine, "SELECT count(*) FROM samples") == [(0,)]
    assert await fetch(engine, "SELECT count(*) FROM agent_upload_parts") == [(0,)]


# --- 1. memory: ITL values, bytes of an upload and of a key, assembly -----------------------

async def test_a_sample_with_more_itl_values_than_allowed_is_422_naming_it(
        api: httpx.AsyncClient, app: FastAPI, simulator: Any) -> None:
    headers, probe = await setup(api, simulator.base_url)
    body = whole(probe)
    body["samples"][1][5] = [1] * 65_537  # one byte each in msgpack: 64 KB, 65,537 gaps
    assert fields(await send(api, headers, body)) == {"body.samples[1].itl_ms"}
    await nothing_written(app)


@pytest.fixture
async def small(database_url: str) -> Any:
    """An app whose agent uploads may hold 1 MiB (the least the setting allows)."""
    app = create_app(app_settings(database_url, auto_migrate=False,
                                  agent_upload_max_bytes=MiB))
    async with serving(app) as api:
        yield app, api


async def test_an_upload_beyond_its_bytes_is_413_and_its_parts_go(
        small: tuple[FastAPI, httpx.AsyncClient], simulator: Any) -> None:
    app, api = small
    headers, probe = await setup(api, simulator.base_url)
    run = spooled(probe, recent_tick(), 4 * 2500)  # four parts of about 360 KB
    answers = [await send(api, headers, part_body(run, n, 4)) for n in range(3)]
    assert [r.status_code for r in answers] == [200, 200, 413]
    assert "SUSTAIN_AGENT_UPLOAD_MAX_BYTES" in answers[2].text
    await nothing_written(app)  # the upload can never complete: its first parts went too


async def test_a_new_upload_while_the_key_s_bytes_wait_is_409_and_the_first_completes(
        small: tuple[FastAPI, httpx.AsyncClient], simulator: Any) -> None:
    app, api = small
    headers, probe = await setup(api, simulator.base_url)
    first = spooled(probe, recent_tick(hours_ago=1), 2 * 3300)  # parts of about 490 KB
    second = spooled(probe, recent_tick(hours_ago=2), 2 * 4000)  # about 580 KB
    assert (await send(api, headers, part_body(first, 0, 2))).status_code == 200
    refused = await send(api, headers, part_body(second, 0, 2))
    assert refused.status_code == 409, refused.text
    assert (await send(api, headers, part_body(first, 1, 2))).json()["outcome"] == "stored"
    assert (await send(api, headers, part_body(second, 0, 2))).status_code == 200, \
        "once the first is stored, its bytes no longer count"
    engine = runtime_of(app).engine
    assert await fetch(engine, "SELECT count(*) FROM samples") == [(6600,)]


def peak_rss() -> int:
    """This process's peak resident set so far, bytes (VmHWM)."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


async def test_assembling_a_max_size_upload_holds_one_part_decoded_at_a_time(
        database_url: str, simulator: Any) -> None:
    """Eight 1 MiB parts of 16 samples with 64,000 one-byte ITL gaps each: 1M gaps a part,
    about 45 MB decoded. All eight decoded at once (as before) peaked at 360 MB or more;
    one at a time, with each part's gaps reduced to its rows' count, mean and max, far
    less."""
    app = create_app(app_settings(database_url, auto_migrate=False,
                                  agent_upload_max_bytes=8 * MiB + 8 * 4096))
    async with serving(app) as api:
        headers, probe = await setup(api, simulator.base_url)
        base = whole(probe, samples=16 * 8)
        upload_id = str(uuid.uuid4())
        bodies = []
        for n in range(8):
            rows = copy.deepcopy(base["samples"][n * 16:(n + 1) * 16])
            for row in rows:
                row[5] = [0] * 64_000
            bodies.append(msgpack.packb({**base, "upload_id": upload_id, "part": n,
                                         "parts": 8, "samples": rows,
                                         "final": base["final"] if n == 7 else None},
                                        use_bin_type=True))
        assert all(MiB - 64 * 1024 < len(b) <= MiB for b in bodies)
        before = peak_rss()
        answers = [await send(api, headers, body) for body in bodies]
        grown = peak_rss() - before
    assert [r.status_code for r in answers] == [200] * 8, answers[-1].text
    assert answers[-1].json()["outcome"] == "stored"
    assert grown < 200 * MiB, f"peak RSS grew {grown / MiB:.0f} MiB"


async def test_a_part_of_a_million_empty_maps_is_refused_while_it_decodes(
        api: httpx.AsyncClient, app: FastAPI, simulator: Any) -> None:
    """A body just under 1 MiB that is one array of a million empty maps decoded to ~140 MB
    of objects before any check could refuse it (and eight at once to over 1 GB): decoding
    counts the arrays and maps it builds and stops past MAX_CONTAINERS, two parts at a time
    per process."""
    headers, _ = await setup(api, simulator.base_url)
    count = 1_040_000
    head = msgpack.packb({"upload_id": str(uuid.uuid4())}, use_bin_type=True)
    body = (b"\x82" + head[1:] + msgpack.packb("junk") + b"\xdd" + count.to_bytes(4, "big")
            + b"\x80" * count)
    assert len(body) < MiB
    before = peak_rss()
    answers = await asyncio.gather(*(send(api, headers, body) for _ in range(8)))
    grown = peak_rss() - before
    assert {fields(r).pop() for r in answers} == {"body.body"}
    assert "arrays and maps" in answers[0].text
    assert grown < 120 * MiB, f"peak RSS grew {grown / MiB:.0f} MiB"
    await nothing_written(app)


async def test_an_upload_of_more_samples_than_a_run_sends_is_422(
        database_url: str, simulator: Any) -> None:
    """No run sends more than SUSTAIN_MAX_RUN_REQUESTS requests, so no upload carries more
    samples: what assembling one holds is bounded by it, however small its rows."""
    app = create_app(app_settings(database_url, auto_migrate=False, max_run_requests=100))
    async with serving(app) as api:
        headers, probe = await setup(api, simulator.base_url)
        run = spooled(probe, recent_tick(), 150)
        answers = [await send(api, headers, part_body(run, n, 3)) for n in range(3)]
        assert [r.status_code for r in answers[:2]] == [200, 200]
        assert fields(answers[2]) == {"body.samples"}
        assert "SUSTAIN_MAX_RUN_REQUESTS" in answers[2].text
        await nothing_written(app)


# --- 2. partitions -----------------------------------------------------------------------

async def test_samples_outside_the_run_s_window_are_422_and_add_no_partition(
        api: httpx.AsyncClient, app: FastAPI, simulator: Any) -> None:
    headers, probe = await setup(api, simulator.base_url)
    engine = runtime_of(app).engine
    async with engine.begin() as connection:  # the days the storage job keeps ahead, as it
        await partitions.ensure(connection, partitions.days_ahead(  # may be doing meanwhile
            partitions.utc_day(datetime.now(UTC))))
    before = await fetch(engine, PARTITIONS)
    body = whole(probe, samples=900)
    start = datetime(2030, 1, 1, tzinfo=UTC)
    for day, row in enumerate(body["samples"]):  # 900 days, one sample each
        row[-1] = (start + timedelta(days=day)).timestamp()
    assert fields(await send(api, headers, body)) == {"body.samples[0].sent_at"}
    late = whole(probe)
    late["samples"][2][-1] = late["started_at"] + 2 * 86400
    assert fields(await send(api, headers, late)) == {"body.samples[2].sent_at"}
    assert await fetch(engine, PARTITIONS) == before
    await nothing_written(app)
    stored = await send(api, headers, whole(probe))
    assert stored.json()["outcome"] == "stored"
    assert (await fetch(engine, PARTITIONS))[0][0] - before[0][0] <= 2


# --- 3. unclaimed ticks ------------------------------------------------------------------

@pytest.mark.parametrize("tick", [
    "future", "far future", "off the schedule", "older than the bound"])
async def test_an_unclaimed_upload_s_tick_is_a_recent_tick_of_the_schedule(
        api: httpx.AsyncClient, app: FastAPI, simulator: Any, tick: str) -> None:
    headers, probe = await setup(api, simulator.base_url)
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    at = {"future": now + timedelta(minutes=2), "far future": datetime(2149, 1, 1, tzinfo=UTC),
          "off the schedule": now - timedelta(minutes=10, seconds=7),
          "older than the bound": now - timedelta(days=3, minutes=1)}[tick]
    assert fields(await send(api, headers, whole(probe, at))) == {"body.tick"}
    await nothing_written(app)


async def test_more_upload_ids_for_one_tick_add_no_run(
        api: httpx.AsyncClient, app: FastAPI, simulator: Any) -> None:
    headers, probe = await setup(api, simulator.base_url)
    tick = recent_tick()
    first = (await send(api, headers, whole(probe, tick))).json()
    others = [(await send(api, headers, whole(probe, tick))).json() for _ in range(5)]
    assert first["outcome"] == "stored"
    assert {(o["outcome"], o["run_id"]) for o in others} == {("partition", first["run_id"])}
    engine = runtime_of(app).engine
    assert await fetch(engine, "SELECT count(*) FROM runs") == [(1,)]
    assert await fetch(engine, "SELECT count(*) FROM samples") == [(3,)]
    assert await fetch(engine, "SELECT count(*) FROM agent_upload_parts") == [(0,)]


# --- 4. sample values --------------------------------------------------------------------

@pytest.mark.parametrize(("index", "value", "field"), [
    (6, -1e300, "e2e_ms"), (6, float("inf"), "e2e_ms"), (4, float("nan"), "ttft_ms"),
    (3, -5.0, "t_send_ms"), (3, 1e15, "t_send_ms"), (2, -1.0, "t_sched_ms"),
    (7, -1, "output_tokens"), (9, 2**40, "input_tokens"), (13, -3, "cached_tokens"),
    (14, 1e300, "tool_call_ms"), (0, -1, "seq"), (1, 70_000, "stage"),
    (5, [10.0, -1.0], "itl_ms"), (5, [1e12], "itl_ms"), (10, 70_000, "http_status"),
    (20, -2.0, "audio_s"), (22, [["embed", -4.0]], "stages_ms"),
    (22, [["x" * 1000, 4.0]], "stages_ms"), (25, "yes", "streamed"), (25, 1, "streamed"),
])
async def test_a_sample_value_beyond_its_bounds_is_422_naming_sample_and_field(
        api: httpx.AsyncClient, app: FastAPI, simulator: Any, index: int, value: Any,
        field: str) -> None:
    headers, probe = await setup(api, simulator.base_url)
    body = whole(probe)
    body["samples"][2][index] = value
    assert fields(await send(api, headers, body)) == {f"body.samples[2].{field}"}
    await nothing_written(app)


async def test_an_upload_of_an_agent_of_the_previous_release_is_stored(
        api: httpx.AsyncClient, app: FastAPI, simulator: Any) -> None:
    """Its sample rows end before `streamed` (the wall time right after `prompt_tokens_
    requested`) and its summaries have no `not_streamed`: stored, the samples' `streamed`
    null, the summary's count 0."""
    headers, probe = await setup(api, simulator.base_url)
    body = whole(probe)
    body["samples"] = [[*row[:25], row[-1]] for row in body["samples"]]
    summary = body["final"]["summary"]
    for part in [summary, *(stage["summary"] for stage in summary.get("stages") or [])]:
        part.pop("not_streamed")
    r = await send(api, headers, body)
    assert r.json()["outcome"] == "stored", r.text
    engine = runtime_of(app).engine
    assert await fetch(engine, "SELECT count(*), count(streamed) FROM samples") == [(3, 0)]
    run = (await api.get(f"/api/v1/runs/{r.json()['run_id']}")).json()
    assert run["summary"]["not_streamed"] == 0


async def test_a_sample_row_shorter_or_longer_than_a_release_s_is_422(
        api: httpx.AsyncClient, app: FastAPI, simulator: Any) -> None:
    headers, probe = await setup(api, simulator.base_url)
    for row in ([*whole(probe)["samples"][0][:24], 1e9],
                [*whole(probe)["samples"][0], None]):
        body = whole(probe)
        body["samples"][1] = row
        assert fields(await send(api, headers, body)) == {"body.samples[1]"}
    await nothing_written(app)


# --- 5. summaries and /metrics -----------------------------------------------------------

def series_count(text: str) -> int:
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def spoil(summary: dict[str, Any], how: str) -> str:
    """Spoil a run's summary `how`; the field the service must name."""
    distribution = copy.deepcopy(summary["ttft_ms"])
    if how == "unknown key":
        summary["hostile"] = "x" * 100_000
        return "body.final.summary.hostile"
    if how == "unknown nested key":
        summary["ttft_ms"]["p12345"] = 1.0
        return "body.final.summary.ttft_ms.p12345"
    if how == "rag stage":
        summary["rag_stages_ms"] = {f"stage{n}": distribution for n in range(3)}
        return "body.final.summary.rag_stages_ms.stage0"
    if how == "server metric":
        summary["server_metrics"] = {f"m{n}": {"min": 0, "mean": 0, "max": 0, "last": 0,
                                               "points": 1} for n in range(3)}
        return "body.final.summary.server_metrics.m0"
    if how == "currency":
        summary["efficiency"] = {
            "output_tps_per_accelerator": 1.0, "output_tps_per_kw": 1.0,
            "cost_per_million_output_tokens": 1.0, "cost_per_million_good_tokens": None,
            "currency": "x" * 1000}
        return "body.final.summary.efficiency.currency"
    if how == "another currency":
        summary["efficiency"] = {
            "output_tps_per_accelerator": 1.0, "output_tps_per_kw": 1.0,
            "cost_per_million_output_tokens": 1.0, "cost_per_million_good_tokens": None,
            "currency": "EUR"}
        return "body.final.summary.efficiency.currency"
    assert how == "error class"
    summary["errors"] = {"made_up": 1}
    return "body.final.summary.errors.made_up"


@pytest.mark.parametrize("how", ["unknown key", "unknown nested key", "rag stage",
                                 "server metric", "currency", "another currency",
                                 "error class"])
async def test_a_summary_off_its_schema_or_its_label_sets_is_422_and_metrics_do_not_grow(
        api: httpx.AsyncClient, app: FastAPI, simulator: Any, how: str) -> None:
    headers, probe = await setup(api, simulator.base_url)
    stored = await send(api, headers, whole(probe, recent_tick(hours_ago=2)))
    assert stored.json()["outcome"] == "stored", stored.text
    before = series_count((await api.get("/metrics")).text)
    body = whole(probe)
    field = spoil(body["final"]["summary"], how)
    assert fields(await send(api, headers, body)) == {field}
    assert series_count((await api.get("/metrics")).text) == before
    assert await fetch(runtime_of(app).engine, "SELECT count(*) FROM runs") == [(1,)]


async def test_a_summary_with_its_endpoint_s_series_and_currency_is_stored(
        api: httpx.AsyncClient, simulator: Any) -> None:
    headers, probe = await setup(api, simulator.base_url, endpoint={
        "metrics_names": ["my_queue"],
        "deployment": {"accelerator": "H100", "accelerators": 1, "price_per_hour": 2.0,
                       "currency": "EUR"}})
    body = whole(probe)
    summary = body["final"]["summary"]
    summary["server_metrics"] = {name: {"min": 0, "mean": 1, "max": 2, "last": 1,
                                        "points": 3} for name in ("waiting", "my_queue")}
    spoil(summary, "another currency")
    r = await send(api, headers, body)
    assert r.json()["outcome"] == "stored", r.text
    text = (await api.get("/metrics")).text
    assert 'series="my_queue"' in text
    assert 'currency="EUR"' in text


async def test_a_stored_hostile_summary_adds_no_series(
        api: httpx.AsyncClient, app: FastAPI, simulator: Any) -> None:
    """Even a summary stored before these checks (or written by hand) cannot add series: the
    exporter takes label values from the closed sets only."""
    headers, probe = await setup(api, simulator.base_url)
    r = await send(api, headers, whole(probe))
    assert r.json()["outcome"] == "stored", r.text
    before = series_count((await api.get("/metrics")).text)
    summary = copy.deepcopy(whole(probe)["final"]["summary"])
    distribution = summary["ttft_ms"]
    summary["rag_stages_ms"] = {f"s{n}": distribution for n in range(100)}
    summary["server_metrics"] = {f"m{n}": {"min": 0, "mean": 0, "max": 0, "last": 0,
                                           "points": 1} for n in range(100)}
    summary["efficiency"] = {f"f{n}": 1.0 for n in range(100)}
    summary["efficiency"]["currency"] = "y" * 100_000
    async with runtime_of(app).engine.begin() as connection:
        await connection.execute(text("UPDATE runs SET summary = CAST(:s AS jsonb)"),
                                 {"s": json.dumps(summary)})
    exported = (await api.get("/metrics")).text
    assert series_count(exported) <= before
    assert "y" * 100 not in exported


def test_parts_of_a_legitimate_upload_stay_below_the_body_limit() -> None:
    """The agent splits by bytes as well as by count, so no part of its own is a 413."""
    run = spooled(1, recent_tick(), MAX_PART_SAMPLES + 7)
    heavy = copy.deepcopy(run.samples[:40])
    for row in heavy:
        row[5] = [12.5] * 65_536  # the most gaps a sample may carry, as floats
    chunks = split_samples([*heavy, *run.samples], 10_000)
    assert sum(map(len, chunks)) == MAX_PART_SAMPLES + 47
    assert all(len(msgpack.packb(c, use_bin_type=True)) <= max(PART_BYTES, 600_000)
               for c in chunks)
    assert all(len(c) <= MAX_PART_SAMPLES for c in chunks)


def far_apart(sparse: bool) -> bytes:
    """A sketch of two values 40 million bin keys apart: in a sparse bin map (which ddsketch's
    decoder ignores), or as one dense bin at key 20,000,000 beside a normal one."""
    proto: Any = DDSketchProto.to_proto(  # type: ignore[no-untyped-call]
        DDSketch(RELATIVE_ACCURACY))
    if sparse:
        proto.positiveValues.binCounts[-20_000_000] = 1.0
        proto.positiveValues.binCounts[20_000_000] = 1.0
    else:
        proto.positiveValues.contiguousBinIndexOffset = 20_000_000
        proto.positiveValues.contiguousBinCounts.append(1.0)
    message: bytes = proto.SerializeToString()
    return struct.pack("<3d", 2.0, 1.0, 1.0) + message


@pytest.mark.parametrize("sparse", [True, False], ids=["sparse-map", "far-offset"])
async def test_a_sketch_with_bins_forty_million_keys_apart_is_422_and_grows_nothing(
        api: httpx.AsyncClient, app: FastAPI, simulator: Any, sparse: bool) -> None:
    """The rollups' merge fills every bin between a sketch's lowest and highest key: kept
    as sent, such a sketch grew the service by 2.75 GB (a list of 40 million counts; keys a
    billion apart, 16 GB), and merging it into its hour's and day's rollups made every later
    run's merge as costly. Bins beyond the keys of finite values (about +-35,000) are
    refused, naming the field."""
    headers, probe = await setup(api, simulator.base_url)
    body = whole(probe)
    body["final"]["sketches"] = [[0, "e2e", far_apart(sparse)]]
    before = peak_rss()
    r = await send(api, headers, body)
    grown = peak_rss() - before
    assert fields(r) == {"body.final.sketches[0].sketch"}
    assert grown < 100 * MiB, f"peak RSS grew {grown / MiB:.0f} MiB"
    await nothing_written(app)
