"""How soon does a cancel land? Two `sustain serve` replicas on one database measure a probe
against the simulator (a 20 req/s run that would go on for a minute); once the run has stored
a few samples it is cancelled through the replica that executes it, or through the other one
(which only records the wish: the executing replica finds it within its 0.5 s poll). The
figure is the time from the cancel request to the run's status reading `cancelled`, its
samples kept. tests/integration/service/test_cancel_runs.py only guards against a cancel that
never lands; the API promises 2 s. Target: every cancel within 2 s.

    python benchmarks/cancel.py [--repeats 5] [--no-record]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import SERVER_URL, drop_database, fresh_database, record
from sustain.probes.measure.percentiles import quantile
from tests.processes import SustainProcess, admin_client, free_port

DATABASE = "sustain_bench_cancel"
TARGET_S = 2.0
LONG = {"kind": "constant", "rate": 20, "duration_s": 60}


def wait(check: Callable[[], bool], timeout_s: float, step_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(step_s)
    raise RuntimeError(f"not within {timeout_s} s")


def cancel_once(api: httpx.Client, via: httpx.Client, probe_id: int) -> float:
    """Seconds from asking `via` to cancel a measuring run of `probe_id` to `cancelled`."""
    run_id = api.post(f"/api/v1/probes/{probe_id}/runs").json()["id"]
    wait(lambda: len(api.get(f"/api/v1/runs/{run_id}/samples").json()["items"]) >= 5, 60, 0.1)
    asked = time.monotonic()
    r = via.post(f"/api/v1/runs/{run_id}/cancel")
    r.raise_for_status()
    wait(lambda: api.get(f"/api/v1/runs/{run_id}").json()["status"] == "cancelled", 60, 0.02)
    return time.monotonic() - asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default=SERVER_URL)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    url = fresh_database(args.server_url, DATABASE)
    found: dict[str, list[float]] = {"the executing replica": [], "the other replica": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sim_port, ports = free_port(), [free_port(), free_port()]
            simulator = SustainProcess(["simulate", "--port", str(sim_port), "--ttft-ms", "50",
                                        "--itl-ms", "10", "--output-tokens", "4"],
                                       Path(tmp) / "simulator.log")
            env = {"SUSTAIN_DATABASE_URL": url}
            replicas = [SustainProcess(["serve", "--port", str(port)], Path(tmp) / f"r{i}.log",
                                       env={**env, "SUSTAIN_REPLICA_ID": f"r{i}"})
                        for i, port in enumerate(ports)]
            with simulator, replicas[0], replicas[1], \
                    admin_client(f"http://127.0.0.1:{ports[0]}", 30) as api, \
                    admin_client(f"http://127.0.0.1:{ports[1]}", 30) as other:
                simulator.wait_http(f"http://127.0.0.1:{sim_port}/v1/models")
                for replica, port in zip(replicas, ports, strict=True):
                    replica.wait_http(f"http://127.0.0.1:{port}/readyz")
                endpoint = api.post("/api/v1/endpoints", json={
                    "name": "sim", "base_url": f"http://127.0.0.1:{sim_port}/v1",
                    "model": "sim-model"}).json()
                probe_id = int(api.post("/api/v1/probes", json={
                    "name": "long", "endpoint_id": endpoint["id"], "interval_s": 3600,
                    "enabled": False, "profile": LONG,
                    "workload": {"max_tokens": 4}}).json()["id"])
                for _ in range(args.repeats):
                    found["the executing replica"].append(cancel_once(api, api, probe_id))
                    found["the other replica"].append(cancel_once(api, other, probe_id))
    finally:
        drop_database(args.server_url, DATABASE)
    rows = []
    for through, seconds in found.items():
        seconds.sort()
        ok = seconds[-1] <= TARGET_S
        rows.append(f"| {through} | {len(seconds)} | {quantile(seconds, 0.5):.2f} | "
                    f"{seconds[-1]:.2f} / {TARGET_S:g} {'pass' if ok else 'FAIL'} |")
        print(rows[-1], flush=True)
    table = ("| cancelled through | cancels | median s | max s / target |\n"
             "|---|---|---|---|\n" + "\n".join(rows) +
             f"\n\nTarget: a running run reads `cancelled` within {TARGET_S:g} s of the request.")
    command = f"python benchmarks/cancel.py --repeats {args.repeats}"
    if args.no_record:
        print(table)
    else:
        worst = max(max(seconds) for seconds in found.values())
        record("cancel: from the request to a cancelled run", command, table,
               headline=f"max {worst:.2f} s over {sum(map(len, found.values()))} cancels")


if __name__ == "__main__":
    main()
