"""A probe measured while other clients keep the service busy (issue 15), shared by the e2e
test and benchmarks/busy_service.py.

The simulator (its own process, 50 ms TTFT, truth log on) serves only the probe; sustain
serves the API from its own process and measures in worker processes (unless the caller sets
SUSTAIN_MEASURE_WORKERS=0). `readers` threads read the status page, the probe's summary,
drift and series, a run's samples as CSV, and /metrics in a loop for as long as the measured
run goes. The reported TTFT p99 is compared with the simulator's own: from the moment each
request arrived to the moment its first token was written.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from sustain.probes.measure.percentiles import quantile
from tests.processes import SustainProcess, admin_client, free_port

RATE = 100.0


@dataclass(frozen=True, slots=True)
class BusyFigures:
    requests: int
    lag_p99_ms: float
    ttft_p99_ms: float
    """As sustain reported it."""
    truth_ttft_p99_ms: float
    """As the simulator timed it: first token written minus request arrival."""
    reads: int
    """API reads the readers completed during the run."""
    read_errors: int


def truth_ttft_ms(log: Path) -> list[float]:
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return sorted((r["first_token"] - r["arrival"]) * 1000.0 for r in records
                  if r.get("first_token") is not None)


def read_loop(base: str, paths: list[str], stop: threading.Event,
              counts: list[int]) -> None:
    """Read every path in turn until `stop`; counts[0] reads, counts[1] failures."""
    with admin_client(base, timeout=60) as api:
        while not stop.is_set():
            for path in paths:
                try:
                    ok = api.get(path).status_code == 200
                except httpx.HTTPError:
                    ok = False
                counts[0 if ok else 1] += 1
                if stop.is_set():
                    return


def busy_probe(tmp_path: Path, database_url: str, readers: int, duration_s: float,
               env: dict[str, str] | None = None) -> BusyFigures:
    """One run of RATE req/s for `duration_s` with `readers` API readers going meanwhile."""
    sim_port, port = free_port(), free_port()
    truth = tmp_path / "truth.jsonl"
    simulator = SustainProcess(
        ["simulate", "--port", str(sim_port), "--ttft-ms", "50", "--itl-ms", "10",
         "--output-tokens", "32", "--truth-log", str(truth)], tmp_path / "simulator.log")
    service = SustainProcess(["serve", "--port", str(port)], tmp_path / "serve.log",
                             env={"SUSTAIN_DATABASE_URL": database_url, **(env or {})})
    base = f"http://127.0.0.1:{port}"
    with simulator, service, admin_client(base, timeout=30) as api:
        simulator.wait_http(f"http://127.0.0.1:{sim_port}/v1/models")
        service.wait_http(f"{base}/readyz")
        endpoint = api.post("/api/v1/endpoints", json={
            "name": "sim", "base_url": f"http://127.0.0.1:{sim_port}/v1",
            "model": "sim-model"}).json()

        def probe(name: str, seconds: float) -> int:
            created = api.post("/api/v1/probes", json={
                "name": name, "endpoint_id": endpoint["id"], "interval_seconds": 3600,
                "enabled": False, "workload": {"max_tokens": 32},
                "profile": {"kind": "constant", "rate": RATE, "duration_s": seconds,
                            "warmup_s": 1.0}}).json()
            return int(created["id"])

        def run(probe_id: int) -> dict[str, object]:
            run_id = api.post(f"/api/v1/probes/{probe_id}/runs").json()["id"]
            deadline = time.monotonic() + duration_s + 120
            while time.monotonic() < deadline:
                body: dict[str, object] = api.get(f"/api/v1/runs/{run_id}").json()
                if body["status"] not in ("pending", "running"):
                    return body
                time.sleep(0.25)
            raise AssertionError(f"run {run_id} did not finish:\n{service.output()[-3000:]}")

        first = probe("history", 3.0)
        earlier = run(first)
        measured = probe("busy", duration_s)
        paths = ["/", f"/api/v1/probes/{first}/summary", f"/api/v1/probes/{first}/drift",
                 f"/api/v1/probes/{first}/series?step=1m",
                 f"/api/v1/runs/{earlier['id']}/samples?format=csv", "/metrics"]
        truth.write_text("")
        stop = threading.Event()
        counts = [[0, 0] for _ in range(readers)]
        threads = [threading.Thread(target=read_loop, args=(base, paths, stop, counts[i]),
                                    daemon=True) for i in range(readers)]
        for thread in threads:
            thread.start()
        try:
            body = run(measured)
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)
    assert body["status"] == "succeeded", body
    summary = body["summary"]
    assert isinstance(summary, dict)
    truth_ttft = truth_ttft_ms(truth)
    return BusyFigures(
        requests=int(summary["attempts"]),
        lag_p99_ms=float(summary["lag_ms"]["p99"]),
        ttft_p99_ms=float(summary["ttft_ms"]["p99"]),
        truth_ttft_p99_ms=quantile(truth_ttft, 0.99),
        reads=sum(c[0] for c in counts), read_errors=sum(c[1] for c in counts))
