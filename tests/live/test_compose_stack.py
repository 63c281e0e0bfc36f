"""The compose stack users run (docker-compose.yml, unchanged; stand-in images where no registry
answers): Prometheus scrapes sustain and loads the rules `sustain rules` generated, and a probe
whose endpoint breaks pages through Alertmanager, then resolves there once the endpoint heals."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import yaml

from tests.live.docker import DEPLOY
from tests.live.stack import ComposeStack
from tests.processes import admin_client, wait_until

PROBE = "simulator-heartbeat"


def test_prometheus_scrapes_sustain_and_loads_the_generated_rules(stack: ComposeStack) -> None:
    prometheus = httpx.Client(base_url=stack.url("prometheus"), timeout=10)

    def sustain_target() -> dict[str, Any] | None:
        targets = prometheus.get("/api/v1/targets").json()["data"]["activeTargets"]
        return next((t for t in targets if t["labels"]["job"] == "sustain"), None)

    wait_until(lambda: (sustain_target() or {}).get("health") == "up", timeout_s=90, step_s=1)
    exported = prometheus.get("/api/v1/query", params={
        "query": 'count({job="sustain", __name__=~"sustain_.+"})'}).json()["data"]["result"]
    assert exported
    assert int(exported[0]["value"][1]) > 10

    generated = {group["name"]: len(group["rules"])
                 for file in sorted((DEPLOY / "prometheus" / "rules").glob("*.yml"))
                 for group in yaml.safe_load(file.read_text())["groups"]}
    assert generated

    def loaded() -> dict[str, list[dict[str, Any]]]:
        groups = prometheus.get("/api/v1/rules").json()["data"]["groups"]
        return {group["name"]: group["rules"] for group in groups}

    assert {name: len(rules) for name, rules in loaded().items()} == generated
    wait_until(lambda: all(rule["health"] == "ok" for rules in loaded().values()
                           for rule in rules), timeout_s=60, step_s=1)


def _drive(api: httpx.Client, probe_id: int, until: Callable[[], bool],
           timeout_s: float) -> float:
    """Start runs of the probe back to back (a 409 means one is in flight) until `until()`
    holds; seconds it took. The schedule's own runs go on beside these."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if until():
            return time.monotonic() - started
        answer = api.post(f"/api/v1/probes/{probe_id}/runs")
        assert answer.status_code in (202, 409), answer.text
        time.sleep(1.0)
    raise AssertionError(f"not within {timeout_s:.0f} s")


def test_a_broken_endpoint_pages_through_alertmanager_and_resolves_when_healed(
        stack: ComposeStack) -> None:
    api = admin_client(stack.url("sustain"))
    simulator = httpx.Client(base_url=stack.url("simulator"), timeout=10)
    alertmanager = httpx.Client(base_url=stack.url("alertmanager"), timeout=10)
    probe_id = next(p["id"] for p in api.get("/api/v1/probes").json()["items"]
                    if p["name"] == PROBE)

    def down_alerts() -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = alertmanager.get("/api/v2/alerts", params={
            "filter": ['alertname="SustainEndpointDown"', f'probe="{PROBE}"']}).json()
        return alerts

    assert down_alerts() == []
    simulator.put("/sim/fault", json={"fault": "http_500", "fault_rate": 1.0}).raise_for_status()
    try:
        _drive(api, probe_id, lambda: bool(down_alerts()), timeout_s=150)
    finally:
        simulator.put("/sim/fault", json={"fault": "none", "fault_rate": 0.0}).raise_for_status()
    (alert,) = down_alerts()
    assert alert["labels"]["severity"] == "page"
    assert alert["status"]["state"] == "active"
    assert alert["generatorURL"].startswith("http://localhost:8000/api/v1/alerts/")
    assert _own_down(api) == ["firing"]

    _drive(api, probe_id, lambda: down_alerts() == [], timeout_s=150)
    assert _own_down(api) in ([], ["resolved"])


def _own_down(api: httpx.Client) -> list[str]:
    """States of sustain's own SustainEndpointDown alerts for the probe."""
    return [a["state"] for a in api.get("/api/v1/alerts").json()["items"]
            if a["labels"].get("alertname") == "SustainEndpointDown"
            and a["labels"].get("probe") == PROBE]


def test_the_second_location_measures_the_probes_that_list_it(stack: ComposeStack) -> None:
    """sustain-west (location `west`) runs the heartbeat probe's ticks there, beside the
    first replica's in `default`: one run per tick in each."""
    api = admin_client(stack.url("sustain"))
    probe = next(p for p in api.get("/api/v1/probes").json()["items"] if p["name"] == PROBE)
    assert probe["locations"] == ["default", "west"]

    def ran_in(location: str) -> bool:
        runs = api.get("/api/v1/runs", params={"probe_id": probe["id"],
                                               "location": location}).json()["items"]
        return any(r["status"] == "succeeded" and r["trigger"] == "schedule" for r in runs)

    wait_until(lambda: ran_in("west") and ran_in("default"), timeout_s=120, step_s=2)
