"""`sustain demo` on the embedded default: a succeeded run, metrics counting it, one owner per
data directory, nothing left running after Ctrl-C, runs kept across restarts. The promise of
a first succeeded run within 30 s depends on the machine: benchmarks/demo_start.py reports
it; here the wait for it only guards against a hang."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psutil

from sustain.service.demo.objects import DEMO_SIMULATOR, simulator_truth
from tests.processes import (
    TEST_ADMIN_KEY,
    SustainProcess,
    admin_client,
    free_port,
    postgres_of,
    wait_until,
)

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
        # its simulator serves the demo's model (the run above succeeded) and no other, as
        # vLLM does; the banner says what latency it is set to
        wrong = httpx.post(f"http://127.0.0.1:{sim_port}/v1/chat/completions", timeout=10,
                           json={"model": "gpt-4o",
                                 "messages": [{"role": "user", "content": "hi"}]})
        assert wrong.status_code == 404, wrong.text
        assert wrong.json()["message"] == "The model `gpt-4o` does not exist."
        assert f"set to {simulator_truth(DEMO_SIMULATOR)}: " in " ".join(first.output().split())
        assert first.stop(signal.SIGINT) == 0
    assert not psutil.pid_exists(first.pid) or psutil.Process(first.pid).status() == "zombie"
    assert postgres_of(tmp_path / "data") == []
    assert not port_open(sim_port)
    assert not port_open(port)

    again = demo(tmp_path, port, "demo3.log")
    # its SIGTERM need not wait for the run this start makes at once (nor for a capacity
    # search the scheduler caught up): draining is tests/e2e/test_replicas.py's
    again.env["SUSTAIN_SHUTDOWN_GRACE_S"] = "0"
    with again:
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


CONFIGURED_TTFT_MS = 50.0
"""The demo simulators' time to first token (`sustain simulate`'s default)."""
TTFT_MARGIN_MS = 20.0
NOISE_FACTOR = 2.0
"""The machine's noise, measured beside the demo, is allowed twice over: two p99s of about a
hundred requests each differ by chance as much as either differs from the truth."""
WINDOW_S = 70.0


def _summary_p99(api: httpx.Client, probe_id: int, window_s: int) -> tuple[float, int]:
    found = api.get(f"/api/v1/probes/{probe_id}/summary",
                    params={"window": f"{window_s}s"}).json()
    return float(found["metrics"]["ttft"]["p99"]), int(found["metrics"]["ttft"]["count"])


def test_demo_probes_do_not_disturb_each_other(tmp_path: Path) -> None:
    """The demo's own configuration with its intervals shortened (the constant probe every
    10 s, the capacity probe every 20 s: it searches for ~18 s) so their runs overlap several
    times in about a minute and a half: the constant probe's TTFT p99 stays within 20 ms of
    the simulator's 50 ms, and every capacity run finds the simulator's 8 slots. The
    machine's own noise is measured beside it: `sustain probe` at the same rate against a
    simulator nobody else uses, in the same window; twice its excess over 50 ms is added to
    the margin (about 0 on a quiet machine)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = demo(tmp_path, port, "demo.log")
    process.env["SUSTAIN_ADMIN_KEY"] = TEST_ADMIN_KEY
    control_port = free_port()
    control_sim = SustainProcess(["simulate", "--port", str(control_port), "--max-batch", "8"],
                                 tmp_path / "control-sim.log")
    with process, control_sim:
        process.wait_http(f"{base}/readyz")
        control_sim.wait_http(f"http://127.0.0.1:{control_port}/v1/models")
        api = admin_client(base)
        probes = {p["name"]: p for p in api.get("/api/v1/probes").json()["items"]}
        for name, interval in (("demo-constant", 10), ("demo-capacity", 20)):
            changed = api.patch(f"/api/v1/probes/{probes[name]['id']}",
                                json={"interval_s": interval})
            assert changed.status_code == 200, changed.text
        assert probes["demo-constant"]["endpoint_id"] != probes["demo-capacity"]["endpoint_id"]
        started = time.monotonic()
        control = SustainProcess(
            ["probe", f"http://127.0.0.1:{control_port}/v1", "--model", "sim-model",
             "--profile", "constant", "--rate", "2", "--duration", str(int(WINDOW_S)),
             "--input-tokens", "32", "--output-tokens", "32", "--json"],
            tmp_path / "control.json")
        with control:
            assert control.proc is not None
            assert control.proc.wait(WINDOW_S + 60) == 0, control.output()
        elapsed = int(time.monotonic() - started) + 1
        # The capacity probe is paused so that its last run can end: a search nearly as long
        # as its interval (as on a loaded machine) has the next run start as soon as one
        # ends, with no moment when none is running.
        paused = api.patch(f"/api/v1/probes/{probes['demo-capacity']['id']}",
                           json={"enabled": False})
        assert paused.status_code == 200, paused.text
        wait_until(lambda: not [r for r in api.get("/api/v1/runs", params={
            "probe_id": probes["demo-capacity"]["id"], "status": "running"}).json()["items"]],
            90, step_s=0.5)
        runs = api.get("/api/v1/runs", params={"limit": 200}).json()["items"]
        window = [r for r in runs if r["finished_at"] and r["status"] == "succeeded"
                  and time.time() - _epoch(r["scheduled_for"]) <= elapsed + 60]
        constant = [r for r in window if r["probe_id"] == probes["demo-constant"]["id"]]
        capacity = [r for r in window if r["probe_id"] == probes["demo-capacity"]["id"]]
        found = [r["summary"]["capacity"]["max_passing"] for r in capacity]
        overlaps = sum(1 for c in constant for k in capacity
                       if _epoch(c["started_at"]) < _epoch(k["finished_at"])
                       and _epoch(k["started_at"]) < _epoch(c["finished_at"]))
        p99, count = _summary_p99(api, probes["demo-constant"]["id"], elapsed + 60)
        report = json.loads(_last_json(control.log_path))
        noise = max(0.0, float(report["ttft_ms"]["p99"]) - CONFIGURED_TTFT_MS)
        print(f"\ndemo over {elapsed} s: demo-constant TTFT p99 {p99:.1f} ms over {count} "
              f"requests in {len(constant)} runs, {overlaps} run pairs overlapping; capacity "
              f"found {found}; control TTFT p99 {report['ttft_ms']['p99']:.1f} ms "
              f"(machine noise {noise:.1f} ms)")
        assert len(capacity) >= 2, "the capacity probe ran more than once"
        assert overlaps >= 3, "the two probes' runs overlapped several times"
        assert found == [8] * len(found), "every capacity run finds the simulator's 8 slots"
        allowance = TTFT_MARGIN_MS + NOISE_FACTOR * noise
        assert p99 <= CONFIGURED_TTFT_MS + allowance, (
            f"demo-constant TTFT p99 {p99:.1f} ms against the simulator's "
            f"{CONFIGURED_TTFT_MS:.0f} ms (+{TTFT_MARGIN_MS:.0f} ms, +{NOISE_FACTOR:g} x "
            f"{noise:.1f} ms noise)")
        assert process.stop(signal.SIGINT) == 0


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _last_json(log: Path) -> str:
    """`sustain probe --json` prints one JSON object (after any log lines)."""
    text = log.read_text(encoding="utf-8")
    return text[text.index("\n{") + 1 if not text.startswith("{") else 0:]


def _simulator_port(output: str) -> int:
    found = re.search(r"against the simulator at http://127\.0\.0\.1:(\d+)/v1",
                      output.replace("\n", " "))
    assert found is not None, output
    return int(found.group(1))


def far_daily_cron() -> str:
    """A daily UTC schedule whose next tick is about two hours away: the scheduler neither
    runs a tick of it nor catches one up at start (only while half the period remains)."""
    at = datetime.now(UTC) + timedelta(hours=2)
    return f"{at.minute} {at.hour} * * *"


def run_at_start(api: httpx.Client, probe_id: int, since: datetime) -> dict[str, object]:
    """The demo's run of the probe made at start (a run-now: trigger manual) after `since`."""
    found: list[dict[str, object]] = []

    def made() -> bool:
        runs = api.get("/api/v1/runs", params={"probe_id": probe_id}).json()["items"]
        found[:] = [r for r in runs if r["trigger"] == "manual"
                    and _epoch(r["scheduled_for"]) >= since.timestamp()]
        return bool(found)

    wait_until(made, 30, step_s=0.2)  # only a hang guard: it starts once /readyz answers
    return found[0]


def test_an_endpoint_made_against_the_demo_simulator_survives_restarts(tmp_path: Path) -> None:
    """The simulator keeps its port from one start to the next, so an endpoint a user made
    against it keeps working; when the remembered port is taken, the simulator moves and the
    endpoint follows it. Each start runs the demo probe at once, whatever its schedule (here
    a daily one whose tick is hours away)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    first = demo(tmp_path, port, "demo1.log")
    first.env["SUSTAIN_ADMIN_KEY"] = TEST_ADMIN_KEY
    with first:
        first.wait_http(f"{base}/readyz")
        sim_port = _simulator_port(first.output())
        api = admin_client(base)
        mine = api.post("/api/v1/endpoints", json={
            "name": "mine", "base_url": f"http://127.0.0.1:{sim_port}/v1", "model": "sim-model"})
        assert mine.status_code == 201, mine.text
        probes = {p["name"]: p for p in api.get("/api/v1/probes").json()["items"]}
        constant = probes["demo-constant"]["id"]
        daily = api.patch(f"/api/v1/probes/{constant}", json={"cron": far_daily_cron()})
        assert daily.status_code == 200, daily.text
        assert first.stop(signal.SIGINT) == 0

    restarted = datetime.now(UTC)
    again = demo(tmp_path, port, "demo2.log")
    again.env["SUSTAIN_ADMIN_KEY"] = TEST_ADMIN_KEY
    with again:
        again.wait_http(f"{base}/readyz")
        assert _simulator_port(again.output()) == sim_port, "the same port as before"
        first_run = run_at_start(admin_client(base), constant, restarted)
        assert first_run["status"] in ("pending", "running", "succeeded"), first_run
        keys = SustainProcess(["keys", "list", "--json"], tmp_path / "keys.log",
                              env={"SUSTAIN_DATA_DIR": str(tmp_path / "data")})
        keys.env.pop("SUSTAIN_DATABASE_URL", None)
        with keys:
            assert keys.proc is not None
            assert keys.proc.wait(60) == 0, keys.output()
        assert "using the embedded PostgreSQL of the sustain process" in keys.output(), \
            "a one-shot command uses the running demo's database"
        endpoint = admin_client(base).get(f"/api/v1/endpoints/{mine.json()['id']}").json()
        assert endpoint["base_url"] == f"http://127.0.0.1:{sim_port}/v1"
        assert port_open(sim_port)
        assert again.stop(signal.SIGINT) == 0

    with socket.socket() as taken:  # another server on the port, bound as servers bind
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", sim_port))
        taken.listen()
        moved = demo(tmp_path, port, "demo3.log")
        moved.env["SUSTAIN_ADMIN_KEY"] = TEST_ADMIN_KEY
        with moved:
            moved.wait_http(f"{base}/readyz")
            new_port = _simulator_port(moved.output())
            assert new_port != sim_port
            endpoint = admin_client(base).get(f"/api/v1/endpoints/{mine.json()['id']}").json()
            assert endpoint["base_url"] == f"http://127.0.0.1:{new_port}/v1", "it followed"
            banner = " ".join(moved.output().split())
            assert "Endpoint 'mine' pointed at a demo simulator that had to move" in banner
            assert "Endpoint 'demo-simulator'" not in banner, "only the user's are named"
            assert moved.stop(signal.SIGINT) == 0
