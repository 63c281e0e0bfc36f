"""After a run against the simulator, `histogram_quantile` over the histograms /metrics
exports (as Prometheus's scrape parses them) agrees with the percentiles sustain's own window
summary gives for the same requests: within 10 % for the steady simulator, whose latencies sit
in one narrow band, within 5 % for one that spreads them."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from sustain.service.probe_metrics import FINE_FROM_S, FINE_TO_S, LATENCY_FAMILIES
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import create_endpoint, create_probe, wait_for_run
from tests.processes import SustainProcess, free_port
from tests.prometheus.promql import histogram_quantile, scraped_buckets

STATS = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
MIN_TAIL = 10
"""As in tests/prometheus/test_histogram_agreement.py: a spread quantile is compared when
this many values lie beyond it."""


@pytest.fixture(scope="module")
def spread_simulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatorHandle]:
    """A simulator whose TTFT and every gap vary lognormally (sigma 0.6 and 0.5). Gaps
    around 20 ms: at 8 ms, tokens a starved simulator sent in bursts put the ITL median
    below the fine range (5 ms) on a loaded machine, and it was not compared."""
    port = free_port()
    log = tmp_path_factory.mktemp("spread-simulator") / "simulator.log"
    with SustainProcess(["simulate", "--port", str(port), "--ttft-ms", "80", "--ttft-sigma",
                         "0.6", "--itl-ms", "20", "--itl-sigma", "0.5", "--output-tokens", "32"],
                        log) as process:
        process.wait_http(f"http://127.0.0.1:{port}/v1/models")
        yield SimulatorHandle(f"http://127.0.0.1:{port}/v1")


async def compare(api: httpx.AsyncClient, base_url: str, rate: int, duration_s: int,
                  band: bool) -> list[tuple[str, str, float, float]]:
    """Run a probe of `rate` requests/s for `duration_s`; (family, stat, histogram_quantile
    s, sustain's s) for every latency family and statistic compared."""
    endpoint = await create_endpoint(api, base_url)
    probe = await create_probe(api, endpoint["id"], enabled=False, profile={
        "kind": "constant", "rate": rate, "duration_s": duration_s})
    run_id = (await api.post(f"/api/v1/probes/{probe['id']}/runs")).json()["id"]
    assert (await wait_for_run(api, run_id, timeout_s=60))["status"] == "succeeded"

    scraped = scraped_buckets((await api.get("/metrics")).text)
    window = (await api.get(f"/api/v1/probes/{probe['id']}/summary",
                            params={"window": "1h"})).json()
    found: list[tuple[str, str, float, float]] = []
    for family in LATENCY_FAMILIES:
        (buckets,) = [b for labels, b in scraped[family.name].items()
                      if dict(labels)["probe"] == probe["name"]]
        sustain = window["metrics"][family.metric]
        assert sustain["count"] == buckets[float("inf")], family.name
        if family.metric in BELOW_FINE_RANGE:
            continue  # a handful of loopback connects: no band, a quantile of a few values
        for stat, q in STATS.items():
            if not FINE_FROM_S <= sustain[stat] / 1000.0 <= FINE_TO_S:
                continue  # outside the range the buckets are fine over (a loopback connect)
            if band or (1.0 - q) * sustain["count"] >= MIN_TAIL:
                found.append((family.metric, stat, histogram_quantile(q, buckets),
                              sustain[stat] / 1000.0))
    return found


BELOW_FINE_RANGE = {"connect", "ttfb"}
"""Families whose values here lie below the fine range (5 ms): counted, not compared (a
loopback connect; the simulator sends its response head at once, its TTFT later)."""


def off(found: list[tuple[str, str, float, float]], tolerance: float) -> list[str]:
    return [f"{family} {stat}: histogram_quantile {prom * 1000:.2f} ms, sustain "
            f"{own * 1000:.2f} ms" for family, stat, prom, own in found
            if abs(prom / own - 1.0) > tolerance]


async def test_a_steady_servers_quantiles_agree_within_10_percent(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    found = await compare(api, simulator.base_url, rate=40, duration_s=3, band=True)
    assert {family for family, *_ in found} >= {f.metric for f in LATENCY_FAMILIES} \
        - BELOW_FINE_RANGE
    assert not off(found, 0.10), off(found, 0.10)


async def test_spread_latencies_agree_within_5_percent(
        api: httpx.AsyncClient, spread_simulator: SimulatorHandle) -> None:
    found = await compare(api, spread_simulator.base_url, rate=50, duration_s=6, band=False)
    assert {(family, stat) for family, stat, *_ in found} >= {
        (f.metric, stat) for f in LATENCY_FAMILIES if f.metric not in BELOW_FINE_RANGE
        for stat in ("p50", "p90")} | {
        ("itl", "p99")}
    assert not off(found, 0.05), off(found, 0.05)
