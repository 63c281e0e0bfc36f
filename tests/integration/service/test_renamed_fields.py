"""Names in the API say their unit (durations end in `_s`, rates in `_per_second`, shares in
`_ratio`): the old names are still read for one release, with a `Warning: 299` header naming
the new one, and still answered beside the new names."""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime, timedelta
from random import Random
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.probes.measure.summary import summarise
from sustain.probes.renamed import SUMMARY_RENAMED
from sustain.probes.run_result import RunResult
from sustain.probes.workload.dataset import DatasetError
from sustain.probes.workload.sessions import parse_sessions
from sustain.service.cli.common import warn_deprecated_variables
from sustain.service.config import Settings
from sustain.service.config_file.load import parse
from sustain.service.runs import summary_record
from sustain.service.runs.upload import UploadError, decode_final
from sustain.service.server_settings import RENAMED_SETTINGS, deprecated_variables
from tests.integration.service.helpers import create_endpoint, create_probe
from tests.integration.service.storage import (
    create_probe_rows,
    fetch,
    seed_run,
    synthetic_samples,
)


async def test_a_probe_created_with_the_old_names_is_stored_and_warned_of(
        api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.post("/api/v1/probes", json={
        "name": "old", "endpoint_id": endpoint["id"], "interval_seconds": 600,
        "jitter_seconds": 5, "enabled": False})
    assert r.status_code == 201, r.text
    warnings = r.headers.get_list("warning")
    assert warnings == [
        '299 - "interval_seconds is deprecated and will be removed in the next release: '
        'use interval_s"',
        '299 - "jitter_seconds is deprecated and will be removed in the next release: '
        'use jitter_s"',
    ]
    probe = r.json()
    assert (probe["interval_s"], probe["jitter_s"]) == (600, 5)
    assert (probe["interval_seconds"], probe["jitter_seconds"]) == (600, 5)


async def test_the_new_names_draw_no_warning(api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.post("/api/v1/probes", json={
        "name": "new", "endpoint_id": endpoint["id"], "interval_s": 600, "jitter_s": 5,
        "enabled": False})
    assert r.status_code == 201, r.text
    assert "warning" not in r.headers
    patched = await api.patch(f"/api/v1/probes/{r.json()['id']}", json={"jitter_seconds": 7})
    assert patched.status_code == 200, patched.text
    assert patched.json()["jitter_s"] == 7
    assert "jitter_s" in patched.headers["warning"]


async def test_both_names_of_one_field_answer_422_naming_the_old_one(
        api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    r = await api.post("/api/v1/probes", json={
        "name": "both", "endpoint_id": endpoint["id"], "interval_seconds": 600,
        "interval_s": 300})
    assert r.status_code == 422, r.text
    assert [e["field"] for e in r.json()["errors"]] == ["interval_seconds"]
    assert (await api.get("/api/v1/probes")).json()["items"] == []


async def test_the_schema_marks_the_old_names_deprecated(api: httpx.AsyncClient) -> None:
    schemas = (await api.get("/openapi.json")).json()["components"]["schemas"]
    read = next(s for name, s in schemas.items() if name.startswith("ProbeRead"))
    assert read["properties"]["interval_seconds"]["deprecated"] is True
    assert "interval_s" in read["required"]


# Names that say their unit (docs/api.md, "Names and units"): audio_s in a workload, and a
# run's figures per second and as ratios, as Prometheus names them.

OLD_FIGURES = {"request_throughput": "requests_per_second",
               "output_token_throughput": "output_tokens_per_second",
               "input_token_throughput": "input_tokens_per_second"}
"""The former names a chat run's summary carries (the item, audio and RAG ones are null)."""


async def transcription_endpoint(api: httpx.AsyncClient) -> dict[str, Any]:
    return await create_endpoint(api, "http://127.0.0.1:9/v1", name="whisper",
                                 api_kind="openai-transcriptions")


async def test_a_workload_s_old_audio_name_is_read_as_audio_s_and_warned_of(
        api: httpx.AsyncClient) -> None:
    endpoint = await transcription_endpoint(api)
    r = await api.post("/api/v1/probes", json={
        "name": "rtf", "endpoint_id": endpoint["id"], "interval_s": 600,
        "workload": {"audio_seconds": 30}, "enabled": False})
    assert r.status_code == 201, r.text
    assert r.headers.get_list("warning") == [
        '299 - "audio_seconds is deprecated and will be removed in the next release: '
        'use audio_s"']
    workload = r.json()["workload"]
    assert (workload["audio_s"], workload["audio_seconds"]) == (30, 30)
    stored = (await api.get(f"/api/v1/probes/{r.json()['id']}")).json()["workload"]
    assert (stored["audio_s"], stored["audio_seconds"]) == (30, 30)


async def test_a_workload_read_and_sent_back_is_taken_without_a_warning(
        api: httpx.AsyncClient) -> None:
    endpoint = await transcription_endpoint(api)
    probe = await create_probe(api, endpoint["id"], workload={"audio_s": 12})
    assert probe["workload"]["audio_seconds"] == 12
    echoed = await api.patch(f"/api/v1/probes/{probe['id']}",
                             json={"workload": probe["workload"]})
    assert echoed.status_code == 200, echoed.text
    assert "warning" not in echoed.headers
    assert echoed.json()["workload"]["audio_s"] == 12
    both = await api.patch(f"/api/v1/probes/{probe['id']}",
                           json={"workload": {"audio_s": 10, "audio_seconds": 12}})
    assert both.status_code == 422, both.text
    assert [e["field"] for e in both.json()["errors"]] == ["workload.audio_seconds"]
    assert (await api.get(f"/api/v1/probes/{probe['id']}")).json()["workload"]["audio_s"] == 12


async def test_a_run_answers_its_figures_by_both_names_and_stores_both(
        api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    start = datetime(2026, 1, 5, 12, tzinfo=UTC)
    probe_id = await create_probe_rows(engine)
    run_id = await seed_run(engine, probe_id, start, synthetic_samples(40, start, Random(1)))
    summary = (await api.get(f"/api/v1/runs/{run_id}")).json()["summary"]
    for old, new in OLD_FIGURES.items():
        assert summary[new] is not None, new
        assert summary[old] == summary[new], old
    ((record,),) = await fetch(engine, "SELECT summary_record FROM runs WHERE id = :id",
                               id=run_id)
    stored = summary_record.unpack(bytes(record))
    assert stored["requests_per_second"] == stored["request_throughput"] > 0


async def test_a_run_stored_under_the_old_names_is_answered_under_both(
        api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    """A summary a replica of the release before stored: only the former names, the whole
    summary as JSONB (no record)."""
    start = datetime(2026, 1, 5, 12, tzinfo=UTC)
    probe_id = await create_probe_rows(engine)
    run_id = await seed_run(engine, probe_id, start, synthetic_samples(40, start, Random(2)))
    ((record,),) = await fetch(engine, "SELECT summary_record FROM runs WHERE id = :id",
                               id=run_id)
    old = {name: value for name, value in summary_record.unpack(bytes(record)).items()
           if name not in OLD_FIGURES.values()}
    async with engine.begin() as connection:
        await connection.execute(text(
            "UPDATE runs SET summary = CAST(:old AS jsonb), summary_record = NULL "
            "WHERE id = :id"), {"old": json.dumps(old), "id": run_id})
    (stored,) = await fetch(engine, "SELECT summary FROM runs WHERE id = :id", id=run_id)
    assert "requests_per_second" not in stored[0]
    assert stored[0]["request_throughput"] > 0
    summary = (await api.get(f"/api/v1/runs/{run_id}")).json()["summary"]
    for former, new in OLD_FIGURES.items():
        assert summary[new] == stored[0][former] == summary[former], former


async def test_a_window_and_a_comparison_answer_both_names(
        api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    start = datetime.now(UTC) - timedelta(hours=1)
    probe_id = await create_probe_rows(engine, "cmp")
    await seed_run(engine, probe_id, start, synthetic_samples(40, start, Random(3)))
    window = (await api.get(f"/api/v1/probes/{probe_id}/summary")).json()
    compared = (await api.get("/api/v1/compare", params={"probe": "cmp"})).json()["probes"][0]
    for figures in (window, compared):
        assert figures["requests_per_second"] > 0
        assert figures["request_throughput"] == figures["requests_per_second"]
        assert figures["output_token_throughput"] == figures["output_tokens_per_second"] > 0
        assert figures["item_throughput"] is figures["items_per_second"] is None
        assert figures["retrieval_hit_rate"] is figures["retrieval_hit_ratio"] is None
    assert compared["rtf"] is compared["rtf_ratio"] is None


def test_an_agent_s_summary_under_either_names_is_stored_under_both() -> None:
    start = datetime(2026, 1, 5, 12, tzinfo=UTC)
    samples = synthetic_samples(20, start, Random(4))
    report = RunResult(samples=samples, summary=summarise(samples, 1.0, None)).report()
    both = report.model_dump(mode="json")
    older = {k: v for k, v in both.items() if k not in SUMMARY_RENAMED.values()}
    for sent in (both, older):
        final = decode_final({"status": "succeeded", "summary": sent}, 1, 1, start, 0)
        assert final.summary is not None
        assert final.summary["requests_per_second"] == final.summary["request_throughput"] \
            == both["requests_per_second"] > 0
    with pytest.raises(UploadError, match=r"final\.summary\.bogus_per_second"):
        decode_final({"status": "succeeded", "summary": {**both, "bogus_per_second": 1}},
                     1, 1, start, 0)


async def test_the_schema_marks_the_old_figure_names_deprecated(
        api: httpx.AsyncClient) -> None:
    schemas = (await api.get("/openapi.json")).json()["components"]["schemas"]
    for prefix in ("RunReport", "WindowSummary", "ProbeFigures"):
        read = next(s for name, s in schemas.items() if name.startswith(prefix)
                    and "request_throughput" in s["properties"])
        assert read["properties"]["request_throughput"]["deprecated"] is True, prefix
        assert "requests_per_second" in read["properties"], prefix
    workload = next(s for name, s in schemas.items() if name.startswith("Workload")
                    and "audio_seconds" in s["properties"])
    assert workload["properties"]["audio_seconds"]["deprecated"] is True


OLD_CONFIG = """\
version: 1
endpoints:
  - name: whisper
    base_url: http://127.0.0.1:9/v1
    model: whisper-1
    api_kind: openai-transcriptions
workloads:
  - name: clip
    audio_seconds: 30
probes:
  - name: rtf
    endpoint: whisper
    workload: clip
    schedule: {every: 10m}
"""


def test_a_config_file_s_old_name_is_read_and_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sustain.service.config_file.load"):
        config, _ = parse(OLD_CONFIG, "renamed-audio.yaml")
        parse(OLD_CONFIG, "renamed-audio.yaml")  # reloaded: not logged again
    assert config.workloads[0].audio_s == 30
    assert [r.getMessage() for r in caplog.records] == [
        "renamed-audio.yaml: audio_seconds is deprecated and will be removed in the next "
        "release: use audio_s"]


def turn_line(**fields: Any) -> str:
    return json.dumps({"conversation_id": "c", "turn": 0,
                       "messages": [{"role": "user", "content": "hi"}], **fields})


def test_a_session_turn_s_delay_is_read_as_delay_s_or_mlperf_s_delay_seconds() -> None:
    for fields in ({"delay_s": 1.5}, {"delay_seconds": 1.5},
                   {"delay_s": 1.5, "delay_seconds": 1.5}):
        (conversation,) = parse_sessions([turn_line(**fields)], "s.jsonl")
        assert conversation.turns[0].delay_s == 1.5, fields
    with pytest.raises(DatasetError, match=r"s\.jsonl:1: give 'delay_s' or 'delay_seconds'"):
        parse_sessions([turn_line(delay_s=1, delay_seconds=2)], "s.jsonl")


# Settings: SUSTAIN_..._SECONDS is SUSTAIN_..._S; the old variable is still read, with a
# warning at start.

def test_a_deprecated_variable_is_still_read_and_named_in_a_warning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUSTAIN_HEARTBEAT_SECONDS", "7")
    monkeypatch.setenv("SUSTAIN_MAX_RUN_SECONDS", "60")
    settings = Settings()
    assert (settings.heartbeat_s, settings.max_run_s) == (7, 60)
    assert deprecated_variables(os.environ) == [
        "SUSTAIN_HEARTBEAT_SECONDS is deprecated and will be removed in the next release: "
        "use SUSTAIN_HEARTBEAT_S",
        "SUSTAIN_MAX_RUN_SECONDS is deprecated and will be removed in the next release: "
        "use SUSTAIN_MAX_RUN_S"]
    monkeypatch.setenv("SUSTAIN_HEARTBEAT_S", "9")
    assert Settings().heartbeat_s == 9  # the new variable wins


def test_the_new_variables_draw_no_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    for old in RENAMED_SETTINGS:
        monkeypatch.delenv(f"SUSTAIN_{old.upper()}", raising=False)
    monkeypatch.setenv("SUSTAIN_RECONCILE_S", "5")
    assert Settings().reconcile_s == 5
    assert deprecated_variables(os.environ) == []


def test_every_renamed_setting_reads_its_old_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for old, new in RENAMED_SETTINGS.items():
        default = Settings.model_fields[new].default
        monkeypatch.setenv(f"SUSTAIN_{old.upper()}", str(default + 1))
        assert getattr(Settings(), new) == default + 1, old
        monkeypatch.delenv(f"SUSTAIN_{old.upper()}")


def test_serve_and_agent_log_each_deprecated_variable_at_start(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("SUSTAIN_CONFIG_RELOAD_SECONDS", "0")
    with caplog.at_level(logging.WARNING, logger="sustain.service.config"):
        warn_deprecated_variables()
    assert [r.getMessage() for r in caplog.records] == [
        "SUSTAIN_CONFIG_RELOAD_SECONDS is deprecated and will be removed in the next release: "
        "use SUSTAIN_CONFIG_RELOAD_S"]
