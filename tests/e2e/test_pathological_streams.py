"""Pathological but well-formed streams, through the whole service: `sustain serve` measures
probes against the simulator's stream modes (the whole stream in one write, one token, no
token, usage only, identical timestamps, more tokens than asked, first and last event at one
instant) beside a normal probe, stores every run, and answers every reading of them (runs,
samples, summary, series, drift, capacity, Pareto, efficiency, compare, the status page, the
HTML report, /metrics) with figures that are finite or null; the next run of another probe is
stored too."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import httpx

from sustain.simulator.config import Fault
from tests.e2e.test_replicas import db
from tests.integration.service.helpers import samples_of
from tests.processes import SustainProcess, admin_client, free_port, wait_until

STREAM_MODES = (Fault.ONE_WRITE, Fault.SINGLE_TOKEN, Fault.ZERO_TOKENS, Fault.USAGE_ONLY,
                Fault.IDENTICAL_TIMESTAMPS, Fault.OVERLONG, Fault.INSTANT)
CONSTANT = {"kind": "constant", "rate": 20, "duration_s": 2}
"""40 requests: enough completed ones (32) for a steady-state judgement of the stage."""
CAPACITY = {"kind": "capacity", "slo": {"ttft_ms": 5000}, "minimum": 2, "maximum": 8,
            "duration_s": 1}
"""No batch limit and a TTFT of 30 ms: every level passes an SLO 100 times as loose, however
busy the machine."""
PARETO = {"kind": "pareto", "max_concurrency": 8, "points": 3, "duration_s": 1}
DEPLOYMENT = {"accelerator": "H200", "accelerators": 2, "price_per_hour": 7.5,
              "power_kw": 1.4}
SUCCEEDING = {Fault.NONE, Fault.ONE_WRITE, Fault.SINGLE_TOKEN, Fault.IDENTICAL_TIMESTAMPS,
              Fault.OVERLONG, Fault.INSTANT}
"""Modes whose requests succeed; under the others (no content at all) a request is `empty`,
so their runs are `failed` (no request succeeded), stored like any other."""


def _refuse_constant(token: str) -> Any:
    raise AssertionError(f"not strict JSON: {token}")


def strict(text: str) -> Any:
    """`text` parsed as strict JSON: NaN and infinities refused."""
    return json.loads(text, parse_constant=_refuse_constant)


def get_json(api: httpx.Client, path: str, **params: Any) -> Any:
    response = api.get(path, params=params)
    assert response.status_code == 200, f"{path}: {response.status_code} {response.text}"
    return strict(response.text)


def finite_metrics(text: str) -> None:
    """Every value /metrics exports is a finite number."""
    for name, samples in samples_of(text).items():
        for labels, value in samples:
            assert math.isfinite(value), f"{name}{labels} = {value}"


def create_probes(api: httpx.Client, sim_port: int) -> dict[str, int]:
    """A probe (on an endpoint of its own, with the fault header of its mode) per stream
    mode beside a normal one, and a capacity and a Pareto probe of one-write streams: their
    ids by name."""
    probes: dict[str, int] = {}

    def create(name: str, mode: Fault, profile: dict[str, Any]) -> None:
        endpoint = api.post("/api/v1/endpoints", json={
            "name": f"sim-{name}", "base_url": f"http://127.0.0.1:{sim_port}/v1",
            "model": "m", "headers": {"x-sim-fault": mode.value},
            "deployment": DEPLOYMENT})
        assert endpoint.status_code == 201, endpoint.text
        probe = api.post("/api/v1/probes", json={
            "name": name, "endpoint_id": endpoint.json()["id"], "interval_s": 3600,
            "profile": profile, "workload": {"max_tokens": 16},
            "slo": {"ttft_ms": 500, "tpot_ms": 100}})
        assert probe.status_code == 201, probe.text
        probes[name] = probe.json()["id"]

    create("normal", Fault.NONE, CONSTANT)
    for mode in STREAM_MODES:
        create(mode.value, mode, CONSTANT)
    create("one-write-capacity", Fault.ONE_WRITE, CAPACITY)
    create("one-write-pareto", Fault.ONE_WRITE, PARETO)
    return probes


def finished(database_url: str, probe_id: int, count: int = 1) -> bool:
    """Whether the probe has at least `count` runs that are final."""
    rows = db(database_url, "SELECT count(*) AS n FROM runs WHERE probe_id = $1 AND "
                            "status NOT IN ('pending', 'running')", probe_id)
    return int(rows[0]["n"]) >= count


def run_each(api: httpx.Client, database_url: str, probes: dict[str, int]) -> dict[str, Any]:
    """Run every probe now and wait until each has a final run; its run by probe name."""
    for probe_id in probes.values():
        run_now = api.post(f"/api/v1/probes/{probe_id}/runs")
        assert run_now.status_code in (202, 409), run_now.text  # 409: its tick runs
    wait_until(lambda: all(finished(database_url, p) for p in probes.values()), 180, 0.5)
    return {name: get_json(api, "/api/v1/runs", probe_id=probe_id)["items"][-1]
            for name, probe_id in probes.items()}


def check_runs_stored(api: httpx.Client, database_url: str, runs: dict[str, Any]) -> None:
    """Each run has the status its mode gives it and a summary, nothing dead-lettered, and
    every request it measured stored and readable."""
    for name, run in runs.items():
        mode = Fault.ONE_WRITE if name.startswith("one-write") else Fault(
            "none" if name == "normal" else name)
        expected = "succeeded" if mode in SUCCEEDING else "failed"
        assert run["status"] == expected, f"{name}: {run['status']} {run['error']}"
        assert run["summary"] is not None, name
        assert "dead_letters" not in (run["error"] or ""), name
        # every request the run measured is stored
        stored = db(database_url, "SELECT count(*) AS n FROM samples WHERE run_id = $1",
                    run["id"])
        assert int(stored[0]["n"]) == run["summary"]["attempts"] > 0, name
        assert get_json(api, f"/api/v1/runs/{run['id']}/dead-letters")["items"] == []
        get_json(api, f"/api/v1/runs/{run['id']}/samples", limit=10_000)


def check_figures(api: httpx.Client, probes: dict[str, int], runs: dict[str, Any]) -> None:
    """The one-write run's steady state is judged on E2E p90; every probe's summary,
    series, drift and capacity read as strict JSON; the capacity, Pareto, efficiency and
    compare figures are there."""
    # every token in one read: TPOT p90 0 everywhere, so the windows are judged on E2E p90
    [stage] = runs[Fault.ONE_WRITE.value]["summary"]["stages"]
    steady = stage["summary"]["steady_state"]
    assert steady["windows"] >= 4
    assert steady["window_metric"] == "e2e_p90"
    assert stage["summary"]["tpot_ms"]["p90"] == 0.0
    for probe_id in probes.values():
        get_json(api, f"/api/v1/probes/{probe_id}/summary", window="1h")
        get_json(api, f"/api/v1/probes/{probe_id}/series", window="1h")
        get_json(api, f"/api/v1/probes/{probe_id}/drift")
        get_json(api, f"/api/v1/probes/{probe_id}/capacity", window="1h")
    capacity = runs["one-write-capacity"]["summary"]["capacity"]
    assert capacity["max_passing"] == 8
    assert len(runs["one-write-pareto"]["summary"]["pareto"]) >= 1
    efficiency = runs[Fault.ONE_WRITE.value]["summary"]["efficiency"]
    assert efficiency["output_tps_per_kw"] > 0
    compared = get_json(api, "/api/v1/compare", probe=list(probes)[:8], window="1h")
    assert len(compared["probes"]) == 8


def check_pages(port: int, probes: dict[str, int], runs: dict[str, Any]) -> None:
    """The public status page names every probe; each run's HTML report has no NaN or
    infinity; the compare page answers."""
    page = httpx.get(f"http://127.0.0.1:{port}/", timeout=30)
    assert page.status_code == 200
    for name in probes:
        assert name in page.text
    for run in runs.values():
        report = httpx.get(f"http://127.0.0.1:{port}/runs/{run['id']}", timeout=30)
        assert report.status_code == 200, report.text
        assert "Infinity" not in report.text
        assert "NaN" not in report.text
    compare_page = httpx.get(f"http://127.0.0.1:{port}/compare", timeout=30, params=[
        ("probe", "one-write-pareto"), ("probe", "normal")])
    assert compare_page.status_code == 200


def check_metrics_and_writer(api: httpx.Client) -> None:
    """/metrics is all finite, with no failed or refused write; /readyz says the writer is
    ok."""
    metrics = api.get("/metrics")
    assert metrics.status_code == 200
    finite_metrics(metrics.text)
    assert samples_of(metrics.text)["sustain_write_failures_total"] == [({}, 0.0)]
    # nothing refused, no retry loop: no batch write failed
    rejected = samples_of(metrics.text)["sustain_storage_rejected_total"]
    assert rejected
    assert {value for _, value in rejected} == {0.0}
    ready = get_json(api, "/readyz")
    assert ready["checks"]["writer"] == "ok"


def test_every_stream_mode_is_stored_and_read_back_finite(tmp_path: Path,
                                                          database_url: str) -> None:
    sim_port, port = free_port(), free_port()
    simulator = SustainProcess(
        ["simulate", "--port", str(sim_port), "--ttft-ms", "30", "--itl-ms", "4",
         "--output-tokens", "16"], tmp_path / "simulator.log")
    env = {"SUSTAIN_DATABASE_URL": database_url, "SUSTAIN_PUBLIC_STATUS_PAGE": "true",
           "SUSTAIN_LOG_LEVEL": "info"}
    service = SustainProcess(["serve", "--port", str(port)], tmp_path / "serve.log", env=env)
    with simulator, service:
        simulator.wait_http(f"http://127.0.0.1:{sim_port}/v1/models")
        service.wait_http(f"http://127.0.0.1:{port}/readyz")
        api = admin_client(f"http://127.0.0.1:{port}", timeout=30)
        probes = create_probes(api, sim_port)
        runs = run_each(api, database_url, probes)
        check_runs_stored(api, database_url, runs)
        check_figures(api, probes, runs)
        check_pages(port, probes, runs)
        check_metrics_and_writer(api)

        # the next run of another probe is stored as well (its first tick may be running:
        # then run-now answers 409 until it ends)
        normal = probes["normal"]
        accepted = api.post(f"/api/v1/probes/{normal}/runs")
        for _ in range(120):
            if accepted.status_code != 409:
                break
            time.sleep(0.5)
            accepted = api.post(f"/api/v1/probes/{normal}/runs")
        assert accepted.status_code == 202, accepted.text
        path = f"/api/v1/runs/{accepted.json()['id']}"
        wait_until(lambda: get_json(api, path)["status"] not in ("pending", "running"),
                   60, 0.5)
        assert get_json(api, path)["status"] == "succeeded"
        assert service.stop() == 0
    assert "samples not written" not in service.output()
