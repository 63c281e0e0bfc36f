"""`sustain demo` on the embedded default: a succeeded run, metrics counting it, one owner per
data directory, nothing left running after Ctrl-C, runs kept across restarts. The promise of
a first succeeded run within 30 s depends on the machine: benchmarks/demo_start.py reports
it; here the wait for it only guards against a hang."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from pathlib import Path

import httpx
import psutil

from tests.processes import SustainProcess, free_port, postgres_of

FIRST_RUN_DEADLINE_S = 120.0
"""Only a hang guard: the first run succeeds ~8 s after start on the 2-core CI machine."""


def demo(tmp_path: Path, port: int, log: str) -> SustainProcess:
    env = {"SUSTAIN_DATA_DIR": str(tmp_path / "data"), "SUSTAIN_PORT": str(port)}
    process = SustainProcess(["demo"], tmp_path / log, env=env)
    process.env.pop("SUSTAIN_DATABASE_URL", None)
    process.env.pop("SUSTAIN_ADMIN_KEY", None)
    return process


def first_succeeded_run(base: str, process: SustainProcess) -> tuple[dict[str, object], float]:
    deadline = process.started_at + FIRST_RUN_DEADLINE_S
    while time.monotonic() < deadline:
        try:
            items = httpx.get(f"{base}/api/v1/runs", params={"status": "succeeded"},
                              timeout=2).json()["items"]
        except httpx.HTTPError:
            items = []
        if items:
            return dict(items[-1]), time.monotonic() - process.started_at
        time.sleep(0.2)
    raise AssertionError(f"no succeeded run within {FIRST_RUN_DEADLINE_S}s:\n{process.output()}")


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_demo_runs_on_embedded_postgres_and_cleans_up(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    first = demo(tmp_path, port, "demo1.log")
    with first:
        run, elapsed = first_succeeded_run(base, first)
        print(f"\ndemo: first succeeded run {elapsed:.1f} s after `sustain demo` started")
        metrics = httpx.get(f"{base}/metrics").text
        counted = [float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                   if line.startswith("sustain_requests_total{") and 'outcome="success"' in line]
        assert counted
        assert counted[0] > 0
        assert postgres_of(tmp_path / "data")
        slos = [s["name"] for s in httpx.get(f"{base}/api/v1/slos").json()["items"]]
        assert slos == ["demo-availability"], "the first screen shows an SLO"
        probes = {p["name"]: p for p in httpx.get(f"{base}/api/v1/probes").json()["items"]}
        assert probes["demo-capacity"]["profile"]["kind"] == "capacity"
        endpoint = httpx.get(f"{base}/api/v1/endpoints").json()["items"][0]
        assert endpoint["deployment"]["accelerators"] == 1

        second = demo(tmp_path, free_port(), "demo2.log").start()
        assert second.proc is not None
        assert second.proc.wait(30) == 2
        assert "in use by another sustain process" in second.output()

        sim_port = int(re.search(r"simulator at http://127\.0\.0\.1:(\d+)/v1",
                                 first.output().replace("\n", " ")).group(1))  # type: ignore[union-attr]
        assert port_open(sim_port)
        assert first.stop(signal.SIGINT) == 0
    assert not psutil.pid_exists(first.pid) or psutil.Process(first.pid).status() == "zombie"
    assert postgres_of(tmp_path / "data") == []
    assert not port_open(sim_port)
    assert not port_open(port)

    with demo(tmp_path, port, "demo3.log") as again:
        again.wait_http(f"{base}/readyz")
        ids = [r["id"] for r in httpx.get(f"{base}/api/v1/runs",
                                          params={"limit": 1000}).json()["items"]]
        assert run["id"] in ids
        # reads are open on loopback; writes need the admin key the demo printed
        anonymous = httpx.post(f"{base}/api/v1/keys", json={"name": "k", "role": "viewer"})
        assert anonymous.status_code == 401
        printed = re.findall(r"sk_sustain_[A-Za-z0-9_-]{43}", again.output())
        assert printed
        created = httpx.post(f"{base}/api/v1/keys", json={"name": "k", "role": "viewer"},
                             headers={"Authorization": f"Bearer {printed[-1]}"})
        assert created.status_code == 201, created.text
        assert again.stop(signal.SIGTERM) == 0
    assert postgres_of(tmp_path / "data") == []
    assert os.path.exists(tmp_path / "data" / "postgres" / "PG_VERSION")


def test_demo_refuses_to_bind_beyond_loopback(tmp_path: Path) -> None:
    process = demo(tmp_path, free_port(), "demo.log")
    process.args = ["demo", "--host", "0.0.0.0"]
    with process:
        assert process.proc is not None
        assert process.proc.wait(30) == 2
    assert "binds loopback only" in process.output()
