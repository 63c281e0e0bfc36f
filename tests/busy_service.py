"""A probe measured while other clients keep the service busy, shared by the e2e
test and benchmarks/busy_service.py.

The simulator (its own process, 50 ms TTFT, truth log on) serves only the probe; sustain
serves the API from its own process and measures in worker processes (unless the caller sets
SUSTAIN_MEASURE_WORKERS=0). `readers` threads read the status page, the probe's summary,
drift and series, a run's samples as CSV, and /metrics in a loop for as long as the measured
run goes. The reported TTFT p99 is compared with the simulator's own: from the moment each
request arrived to the moment its first token was written.

Besides the figures (for the benchmark), BusyFigures carries what the e2e test checks without
a bound on any measured time: every request stored, the readers' work during the run, the
run's own saturation verdict, and each request's TTFT as stored next to the earliest the
simulator could have answered it (its first token is not due before `ttft_ms` after the start
of generation, and the client's clock starts before the request arrives).
"""

from __future__ import annotations

import csv
import io
import json
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx

from sustain.probes.measure.percentiles import quantile
from tests.processes import SustainProcess, admin_client, free_port

RATE = 100.0
TTFT_MS = 50.0
"""The simulator's TTFT, without jitter: no first token is due sooner after generation starts."""
PATHS_PER_PASS = 6
"""API reads in one pass of a reader (see busy_probe)."""


@dataclass(frozen=True, slots=True)
class BusyFigures:
    requests: int
    failures: int
    lag_p99_ms: float
    """The run's generator health, as sustain reported it."""
    lag_threshold_ms: float
    saturated: bool
    ttft_p99_ms: float
    """As sustain reported it."""
    truth_ttft_p99_ms: float
    """As the simulator timed it: first token written minus request arrival, over the same
    requests (the warmup's left out)."""
    reads: int
    """API reads the readers completed (during the run and just around it)."""
    read_errors: int
    reads_during_run: int
    """Reads that completed between the run's start and its end (the run's own times)."""
    stored: int
    """Samples of the measured run as stored and exported (CSV)."""
    stored_ttft_ms: tuple[float, ...]
    """TTFT of each stored sample of the measured run (the samples as stored and exported)."""
    truth_due_ms: tuple[float, ...]
    """For each request the simulator served for the measured run (the warmup's left out):
    when its first token became due minus when it arrived; a lower bound of its client TTFT."""


def truth_records(log: Path, since: float = 0.0) -> list[dict[str, float]]:
    """The simulator's truth lines for requests that arrived at or after `since`
    (perf_counter seconds: the simulator's clock is this machine's monotonic clock)."""
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [r for r in records if r["arrival"] >= since]


def truth_ttft_ms(records: list[dict[str, float]]) -> list[float]:
    return sorted((r["first_token"] - r["arrival"]) * 1000.0 for r in records
                  if r.get("first_token") is not None)


def read_loop(base: str, paths: list[str], stop: threading.Event, counts: list[int],
              done_at: list[float]) -> None:
    """Read every path in turn until `stop`; counts[0] reads, counts[1] failures; the wall
    clock time (time.time()) at which each good read completed goes to `done_at`."""
    with admin_client(base, timeout=60) as api:
        while not stop.is_set():
            for path in paths:
                try:
                    ok = api.get(path).status_code == 200
                except httpx.HTTPError:
                    ok = False
                counts[0 if ok else 1] += 1
                if ok:
                    done_at.append(time.time())
                if stop.is_set():
                    return


def _constant_probe(api: httpx.Client, endpoint_id: int, name: str, seconds: float,
                    warmup_s: float) -> int:
    """Create a disabled probe sending RATE req/s for `seconds` after `warmup_s`; its id."""
    created = api.post("/api/v1/probes", json={
        "name": name, "endpoint_id": endpoint_id, "interval_s": 3600,
        "enabled": False, "workload": {"max_tokens": 32},
        "profile": {"kind": "constant", "rate": RATE, "duration_s": seconds,
                    "warmup_s": warmup_s}}).json()
    return int(created["id"])


def _finished_run(api: httpx.Client, service: SustainProcess, probe_id: int,
                  duration_s: float) -> dict[str, object]:
    """Start a run of the probe now and wait until it is final; its record."""
    run_id = api.post(f"/api/v1/probes/{probe_id}/runs").json()["id"]
    # Only guards against a run that never ends: it takes duration_s and a moment.
    deadline = time.monotonic() + duration_s + 120
    while time.monotonic() < deadline:
        body: dict[str, object] = api.get(f"/api/v1/runs/{run_id}").json()
        if body["status"] not in ("pending", "running"):
            return body
        time.sleep(0.25)
    raise AssertionError(f"run {run_id} did not finish:\n{service.output()[-3000:]}")


@dataclass(frozen=True, slots=True)
class _Reads:
    """What each reader thread did: [good reads, failures], and when each good read ended."""

    counts: list[list[int]]
    done_at: list[list[float]]


@contextmanager
def _reading(base: str, paths: list[str], readers: int) -> Iterator[_Reads]:
    """`readers` threads reading `paths` in a loop (read_loop) for as long as the block
    goes; they are stopped and joined when it ends, however it ends."""
    stop = threading.Event()
    reads = _Reads([[0, 0] for _ in range(readers)], [[] for _ in range(readers)])
    threads = [threading.Thread(target=read_loop,
                                args=(base, paths, stop, reads.counts[i], reads.done_at[i]),
                                daemon=True) for i in range(readers)]
    for thread in threads:
        thread.start()
    try:
        yield reads
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)


def _figures(body: dict[str, object], exported_csv: str, records: list[dict[str, float]],
             warmup_s: float, reads: _Reads) -> BusyFigures:
    """The figures of the measured run (`body`), its samples as exported (`exported_csv`),
    the simulator's truth records since the run began, and what the readers did."""
    summary = body["summary"]
    assert isinstance(summary, dict)
    rows = list(csv.DictReader(io.StringIO(exported_csv)))
    began = datetime.fromisoformat(str(body["started_at"])).timestamp()
    ended = datetime.fromisoformat(str(body["finished_at"])).timestamp()
    # The warmup's requests come first (10 ms apart, in order); the figures are the measured.
    records = sorted(records, key=lambda r: r["arrival"])
    records = records[math.ceil(warmup_s * RATE - 1e-9):]
    generator = summary["generator"]
    return BusyFigures(
        requests=int(summary["attempts"]), failures=int(summary["failures"]),
        lag_p99_ms=float(generator["lag_p99_ms"]),
        lag_threshold_ms=float(generator["threshold_ms"]),
        saturated=bool(generator["saturated"]),
        ttft_p99_ms=float(summary["ttft_ms"]["p99"]),
        truth_ttft_p99_ms=quantile(truth_ttft_ms(records), 0.99),
        reads=sum(c[0] for c in reads.counts), read_errors=sum(c[1] for c in reads.counts),
        reads_during_run=sum(began <= t <= ended for times in reads.done_at for t in times),
        stored=len(rows),
        stored_ttft_ms=tuple(float(r["ttft_ms"]) for r in rows if r["ttft_ms"]),
        truth_due_ms=tuple((r["first_token_due"] - r["arrival"]) * 1000.0
                           for r in records))


def busy_probe(tmp_path: Path, database_url: str, readers: int, duration_s: float,
               env: dict[str, str] | None = None, warmup_s: float = 1.0) -> BusyFigures:
    """One run of RATE req/s for `duration_s` with `readers` API readers going meanwhile.
    With `warmup_s` 0 every request the simulator serves for the run is a measured one, so
    `truth_due_ms` and `stored_ttft_ms` are the same requests."""
    sim_port, port = free_port(), free_port()
    truth = tmp_path / "truth.jsonl"
    simulator = SustainProcess(
        ["simulate", "--port", str(sim_port), "--ttft-ms", f"{TTFT_MS:g}", "--itl-ms", "10",
         "--output-tokens", "32", "--truth-log", str(truth)], tmp_path / "simulator.log")
    # The readers share the admin key: the export and API-pool limits are raised to let all
    # of them read at once (what they bound is tested in tests/hostile/; here the readers are
    # load, and a refused read would be no load).
    service = SustainProcess(["serve", "--port", str(port)], tmp_path / "serve.log",
                             env={"SUSTAIN_DATABASE_URL": database_url,
                                  "SUSTAIN_EXPORT_MAX_CONCURRENT_PER_KEY": str(readers + 1),
                                  "SUSTAIN_DATABASE_API_POOL_SIZE": str(readers + 2),
                                  **(env or {})})
    base = f"http://127.0.0.1:{port}"
    with simulator, service, admin_client(base, timeout=30) as api:
        simulator.wait_http(f"http://127.0.0.1:{sim_port}/v1/models")
        service.wait_http(f"{base}/readyz")
        endpoint = api.post("/api/v1/endpoints", json={
            "name": "sim", "base_url": f"http://127.0.0.1:{sim_port}/v1",
            "model": "sim-model"}).json()
        first = _constant_probe(api, endpoint["id"], "history", 3.0, 1.0)
        earlier = _finished_run(api, service, first, duration_s)
        measured = _constant_probe(api, endpoint["id"], "busy", duration_s, warmup_s)
        paths = ["/", f"/api/v1/probes/{first}/summary", f"/api/v1/probes/{first}/drift",
                 f"/api/v1/probes/{first}/series?step=1m",
                 f"/api/v1/runs/{earlier['id']}/samples?format=csv", "/metrics"]
        assert len(paths) == PATHS_PER_PASS
        truth.write_text("")
        with _reading(base, paths, readers) as reads:
            since = time.perf_counter()  # every request of the measured run arrives after this
            body = _finished_run(api, service, measured, duration_s)
        assert body["status"] == "succeeded", body
        exported = api.get(f"/api/v1/runs/{body['id']}/samples", params={"format": "csv"})
        assert exported.status_code == 200, exported.text
    return _figures(body, exported.text, truth_records(truth, since), warmup_s, reads)
