"""/metrics after a run: request counters, latency histograms and last-run gauges; each
last-run gauge named with its unit (money labelled with its currency), the old names still
exported for one release and saying so, and every collector describing what it exports."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.ext.asyncio import create_async_engine

from sustain.service.db.runs import LastRun
from sustain.service.ingest.buffer import SampleBuffer
from sustain.service.ingest.writer import SampleWriter
from sustain.service.metrics import EFFICIENCY_GAUGES, RENAMED, Metrics, WriteBufferCollector
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    create_endpoint,
    create_probe,
    samples_of,
    wait_for_run,
)


async def test_metrics_expose_counters_histograms_and_last_run_gauges(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False,
                               profile={"kind": "constant", "rate": 10, "duration_s": 0.5})
    run_id = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"]
    run = await wait_for_run(api, run_id)
    assert run["status"] == "succeeded"

    r = await api.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    metrics = samples_of(r.text)
    series = {"endpoint": "sim", "probe": "p1", "model": "sim-model", "location": "default"}
    assert ({**series, "outcome": "success", "error_class": "none"}, 5.0) in \
        metrics["sustain_requests_total"]
    assert (series, 5.0) in metrics["sustain_ttft_seconds_count"]
    assert (series, 5.0) in metrics["sustain_e2e_seconds_count"]
    assert (series, 160.0) in metrics["sustain_output_tokens_total"]
    buckets = {labels["le"]: v for labels, v in metrics["sustain_ttft_seconds_bucket"]}
    assert buckets["+Inf"] == 5.0
    # The simulator's TTFT is 50 ms, which noise can only lengthen: no request in the
    # buckets below it, every one in some bucket.
    assert all(v == 0.0 for le, v in buckets.items() if le != "+Inf" and float(le) < 0.05)
    counts = [buckets[le] for le in sorted(buckets, key=float)]
    assert counts == sorted(counts), "cumulative buckets"
    (labels, stamp), = metrics["sustain_probe_last_run_timestamp_seconds"]
    assert labels == series
    assert stamp > 1.7e9
    assert (series, 1.0) in metrics["sustain_probe_last_run_success"]
    assert (series, 1.0) in metrics["sustain_probe_last_run_availability_ratio"]
    ttft_p50 = [v for labels, v in metrics["sustain_probe_last_run_ttft_seconds"]
                if labels["quantile"] == "0.5"]
    assert ttft_p50 == [pytest.approx(run["summary"]["ttft_ms"]["p50"] / 1000.0)]
    assert ttft_p50[0] >= 0.05


async def test_failed_requests_are_counted_by_error_class(
        api: httpx.AsyncClient, simulator: SimulatorHandle,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_TOKEN", "sk-top-secret-token")
    endpoint = await create_endpoint(api, simulator.base_url,
                                     auth_secret_ref="env:TEST_TOKEN",
                                     headers={"x-sim-fault": "http_500"})
    probe = await create_probe(api, endpoint["id"], enabled=False)
    run_id = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"]
    run = await wait_for_run(api, run_id)
    assert run["status"] == "failed"
    text = (await api.get("/metrics")).text
    assert "sk-top-secret-token" not in text
    assert 'error_class="http_5xx"' in text
    assert "sk-top-secret-token" not in (await api.get(f"/api/v1/runs/{run_id}")).text
    assert "sk-top-secret-token" not in (await api.get("/api/v1/endpoints")).text



async def test_write_path_metrics_count_what_reached_the_database(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    endpoint = await create_endpoint(api, simulator.base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False,
                               profile={"kind": "constant", "rate": 20, "duration_s": 0.5})
    began = time.monotonic()
    run_id = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"]
    assert (await wait_for_run(api, run_id))["status"] == "succeeded"

    metrics = samples_of((await api.get("/metrics")).text)
    elapsed = time.monotonic() - began
    assert metrics["sustain_samples_written_total"] == [({}, 10.0)]
    assert metrics["sustain_buffer_samples"] == [({}, 0.0)]
    assert metrics["sustain_buffer_capacity_samples"][0][1] > 0
    assert metrics["sustain_samples_dropped_total"] == [({}, 0.0)]
    assert metrics["sustain_write_failures_total"] == [({}, 0.0)]
    ((_, batches),) = metrics["sustain_db_write_seconds_count"]
    ((_, seconds),) = metrics["sustain_db_write_seconds_sum"]
    assert batches >= 1
    # In seconds, and spent within the run (the writer writes one batch at a time), however
    # long that took on this machine.
    assert 0 < seconds <= elapsed


SERIES = {"endpoint": "sim", "probe": "chat", "model": "sim-model", "location": "default"}
PRICED = {"output_tps_per_accelerator": 600.0, "output_tps_per_kw": 250.0, "power_w": 4800.0,
          "power_source": "measured", "joules_per_output_token": 4.0,
          "joules_per_good_token": 5.0, "cost_per_million_output_tokens": 1.25,
          "cost_per_million_good_tokens": 2.5, "currency": "EUR"}
CAPACITY = {"unit": "concurrency", "max_passing": 8, "first_failing": 16,
            "points": [{"level": 4, "system_tps": 700.0}, {"level": 8, "system_tps": 1200.0},
                       {"level": 16, "system_tps": 1300.0}]}


def last_run(**summary: Any) -> LastRun:
    return LastRun(probe=SERIES["probe"], endpoint=SERIES["endpoint"], model=SERIES["model"],
                   location=SERIES["location"], status="succeeded",
                   finished_at=datetime(2026, 5, 1, tzinfo=UTC), summary=summary)


def scrape(*runs: LastRun) -> dict[str, Metric]:
    """/metrics of an app whose probes' newest runs are these, as Prometheus parses it."""
    metrics = Metrics()
    metrics.last_runs.snapshot = runs
    return {family.name: family
            for family in text_string_to_metric_families(metrics.exposition().decode())}


def values(family: Metric) -> list[tuple[dict[str, str], float]]:
    return [(sample.labels, sample.value) for sample in family.samples]


def test_throughputs_are_named_per_second() -> None:
    exported = scrape(last_run(request_throughput=12.5, capacity=CAPACITY))
    assert values(exported["sustain_probe_last_run_requests_per_second"]) == [(SERIES, 12.5)]
    assert values(exported["sustain_capacity_output_tokens_per_second"]) == [(SERIES, 1200.0)]
    assert values(exported["sustain_capacity_concurrency"]) == [(SERIES, 8.0)]


def test_each_efficiency_figure_is_its_own_gauge_in_base_units() -> None:
    exported = scrape(last_run(efficiency=PRICED))
    assert {name: values(exported[name]) for name in (
        "sustain_probe_last_run_output_tokens_per_second_per_accelerator",
        "sustain_probe_last_run_output_tokens_per_joule",
        "sustain_probe_last_run_power_watts",
        "sustain_probe_last_run_energy_per_output_token_joules",
        "sustain_probe_last_run_energy_per_good_token_joules")} == {
        "sustain_probe_last_run_output_tokens_per_second_per_accelerator": [(SERIES, 600.0)],
        # 250 tokens/s per kW is 0.25 tokens/s per W: 0.25 tokens per joule
        "sustain_probe_last_run_output_tokens_per_joule": [(SERIES, 0.25)],
        "sustain_probe_last_run_power_watts": [(SERIES, 4800.0)],
        "sustain_probe_last_run_energy_per_output_token_joules": [(SERIES, 4.0)],
        "sustain_probe_last_run_energy_per_good_token_joules": [(SERIES, 5.0)],
    }
    for gauge in EFFICIENCY_GAUGES:
        assert exported[gauge.name].type == "gauge"
        assert "figure" not in exported[gauge.name].samples[0].labels


def test_money_figures_carry_a_currency_label() -> None:
    exported = scrape(last_run(efficiency=PRICED))
    in_euros = {**SERIES, "currency": "EUR"}
    # per token, not per million: 1.25 EUR per million output tokens
    ((output_labels, per_output_token),) = values(
        exported["sustain_probe_last_run_cost_per_output_token"])
    ((good_labels, per_good_token),) = values(
        exported["sustain_probe_last_run_cost_per_good_token"])
    assert output_labels == good_labels == in_euros
    assert per_output_token == pytest.approx(1.25e-6)
    assert per_good_token == pytest.approx(2.5e-6)
    money = {gauge.name for gauge in EFFICIENCY_GAUGES if gauge.money}
    assert money == {"sustain_probe_last_run_cost_per_output_token",
                     "sustain_probe_last_run_cost_per_good_token"}
    with_currency = {name for name, family in exported.items()
                     if name != "sustain_probe_last_run_efficiency"
                     and any("currency" in sample.labels for sample in family.samples)}
    assert with_currency == money, "only money carries a currency"


def test_a_run_priced_without_a_currency_is_in_the_deployments_default() -> None:
    unnamed = {k: v for k, v in PRICED.items() if k != "currency"}
    exported = scrape(last_run(efficiency=unnamed))
    ((labels, _),) = values(exported["sustain_probe_last_run_cost_per_output_token"])
    assert labels["currency"] == "USD"


def test_figures_a_run_lacks_are_absent_not_zero() -> None:
    exported = scrape(last_run(efficiency={**PRICED, "power_w": None,
                                           "joules_per_output_token": None}))
    assert values(exported["sustain_probe_last_run_power_watts"]) == []
    assert values(exported["sustain_probe_last_run_energy_per_output_token_joules"]) == []
    assert values(exported["sustain_probe_last_run_energy_per_good_token_joules"]) == [
        (SERIES, 5.0)]


def test_deprecated_names_are_still_exported_and_say_so() -> None:
    exported = scrape(last_run(request_throughput=12.5, capacity=CAPACITY, efficiency=PRICED,
                               item_throughput=96.5, rtf={"p50": 0.04, "p99": 0.05}))
    assert RENAMED == {
        "sustain_probe_last_run_request_throughput": "sustain_probe_last_run_requests_per_second",
        "sustain_capacity_system_tps": "sustain_capacity_output_tokens_per_second",
        "sustain_probe_last_run_item_throughput": "sustain_probe_last_run_items_per_second",
        "sustain_probe_last_run_rtf": "sustain_probe_last_run_rtf_ratio"}
    for old, new in RENAMED.items():
        assert exported[old].documentation.startswith(f"Deprecated: use {new}.")
        assert values(exported[old]) == values(exported[new])
        assert values(exported[new]), f"{new} has a value"
        assert not exported[new].documentation.startswith("Deprecated")
    efficiency = exported["sustain_probe_last_run_efficiency"]
    new_names = ", ".join(gauge.name for gauge in EFFICIENCY_GAUGES)
    assert efficiency.documentation.startswith(f"Deprecated: use {new_names}.")
    # as before: every numeric figure, in the summary's units, by `figure`
    assert values(efficiency) == [({**SERIES, "figure": figure}, value)
                                  for figure, value in PRICED.items()
                                  if isinstance(value, float)]


async def test_every_collector_describes_what_it_exports() -> None:
    """client_python's describe(): the same families as collect(), without samples, so the
    registry knows every name (duplicates refused, restricted_registry finds them)."""
    engine = create_async_engine("postgresql+asyncpg://nobody@127.0.0.1:9/none")
    try:
        buffer = SampleBuffer(capacity=10)
        metrics = Metrics()
        writes = WriteBufferCollector(buffer, SampleWriter(engine, buffer))
        metrics.registry.register(writes)
        metrics.last_runs.snapshot = (last_run(request_throughput=12.5, capacity=CAPACITY,
                                               efficiency=PRICED),)
        for collector in (metrics.last_runs, metrics.slos, metrics.alerts, metrics.drift,
                          writes):
            described = list(collector.describe())
            assert [f.name for f in described] == [f.name for f in collector.collect()]
            assert all(f.samples == [] for f in described)
        for family in metrics.last_runs.collect():
            for sample in family.samples:
                shown = generate_latest(metrics.registry.restricted_registry([sample.name]))
                assert f"\n{sample.name}{{".encode() in b"\n" + shown, sample.name
    finally:
        await engine.dispose()
