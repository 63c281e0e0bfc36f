"""Config as code with real processes: two replicas serve the same file; a probe added, changed
and removed in the file reaches the database and both replicas' schedules after a SIGHUP to
one of them; objects created over REST are left alone; REST writes to the file's objects answer
409; a broken file is refused with line numbers and changes nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tests.conftest import asyncpg_dsn
from tests.processes import ADMIN_HEADERS, SustainProcess, admin_client, free_port, sustain_command

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sustain.yaml"

V1 = """\
version: 1
endpoints:
  - name: sim
    base_url: ${SIM_URL}
    model: sim-model
workloads:
  - name: tiny
    max_tokens: 4
probes:
  - name: alpha
    endpoint: sim
    workload: tiny
    schedule: {every: 30s}
  - name: beta
    endpoint: sim
    workload: tiny
    schedule: {every: 1m, jitter: 5s}
"""

V2 = """\
version: 1
endpoints:
  - name: sim
    base_url: ${SIM_URL}
    model: sim-model
workloads:
  - name: tiny
    max_tokens: 4
probes:
  - name: alpha
    endpoint: sim
    workload: tiny
    schedule: {every: 45s}
  - name: gamma
    endpoint: sim
    workload: {max_tokens: 2}
    schedule: {cron: "*/10 * * * *"}
"""

BROKEN = V2.replace("    schedule: {every: 45s}\n", "    schedule: {every: 45s}\n    colour: x\n")


def jobs(port: int) -> dict[str, dict[str, Any]]:
    body = httpx.get(f"http://127.0.0.1:{port}/api/v1/replicas/self", timeout=5,
                     headers=ADMIN_HEADERS).json()
    return {job["probe"]: job for job in body["jobs"]}


def probes_in_db(url: str) -> dict[str, tuple[int, str | None]]:
    async def fetch() -> dict[str, tuple[int, str | None]]:
        connection = await asyncpg.connect(asyncpg_dsn(url))
        try:
            rows = await connection.fetch(
                "SELECT name, interval_seconds, managed_by FROM probes")
            return {r["name"]: (r["interval_seconds"], r["managed_by"]) for r in rows}
        finally:
            await connection.close()
    return asyncio.run(fetch())


def wait_for(predicate: Any, timeout_s: float) -> float:
    """Seconds until predicate() held. The timeouts below (10 s) only guard against a hang:
    a change reaches the other replica in well under a second (LISTEN/NOTIFY), where the
    periodic reconcile (the alternative, were the notification lost) takes 30 s."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if predicate():
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s}s")


def test_config_file_changes_reach_the_database_and_every_replica(
        tmp_path: Path, database_url: str) -> None:
    config = tmp_path / "sustain.yaml"
    config.write_text(V1)
    source = str(config.resolve())
    sim_port = free_port()
    ports = {"c1": free_port(), "c2": free_port()}
    env = {"SUSTAIN_DATABASE_URL": database_url, "SUSTAIN_CONFIG_RELOAD_S": "0",
           "SIM_URL": f"http://127.0.0.1:{sim_port}/v1", "SUSTAIN_CONFIG_ENV": "SIM_URL"}
    simulator = SustainProcess(["simulate", "--port", str(sim_port)], tmp_path / "sim.log")
    replicas = {name: SustainProcess(
        ["serve", "--port", str(port), "--config", str(config)], tmp_path / f"{name}.log",
        env={**env, "SUSTAIN_REPLICA_ID": name}) for name, port in ports.items()}
    with simulator, replicas["c1"], replicas["c2"]:
        for name, port in ports.items():
            replicas[name].wait_http(f"http://127.0.0.1:{port}/readyz")
        assert probes_in_db(database_url) == {"alpha": (30, source), "beta": (60, source)}
        for port in ports.values():
            wait_for(lambda port=port: set(jobs(port)) == {"alpha", "beta"}, 10)

        api = admin_client(f"http://127.0.0.1:{ports['c1']}")
        endpoint_id = api.get("/api/v1/endpoints").json()["items"][0]["id"]
        by_name = {p["name"]: p for p in api.get("/api/v1/probes").json()["items"]}
        assert by_name["alpha"]["managed_by"] == source
        r = api.patch(f"/api/v1/probes/{by_name['alpha']['id']}", json={"enabled": False})
        assert r.status_code == 409
        assert source in r.json()["detail"]
        assert api.delete(f"/api/v1/endpoints/{endpoint_id}").status_code == 409
        r = api.post("/api/v1/probes", json={
            "name": "delta", "endpoint_id": endpoint_id, "interval_s": 120})
        assert r.status_code == 201, r.text

        config.write_text(V2)
        assert replicas["c1"].proc is not None
        replicas["c1"].proc.send_signal(signal.SIGHUP)
        expected = {"alpha", "gamma", "delta"}
        took = wait_for(lambda: set(jobs(ports["c2"])) == expected
                        and jobs(ports["c2"])["alpha"]["interval_s"] == 45, 10)
        print(f"\nSIGHUP on c1 -> schedule of c2 updated in {took:.2f} s")
        assert set(jobs(ports["c1"])) == expected
        assert jobs(ports["c1"])["gamma"]["cron"] == "*/10 * * * *"
        assert probes_in_db(database_url) == {
            "alpha": (45, source), "gamma": (600, source), "delta": (120, None)}

        config.write_text(BROKEN)
        replicas["c1"].proc.send_signal(signal.SIGHUP)
        wait_for(lambda: 'sustain_config_reloads_total{result="invalid"} 1.0'
                 in api.get("/metrics").text, 10)
        assert probes_in_db(database_url)["alpha"] == (45, source)
        assert f"{config}:14: probes[0].colour: unknown field" in replicas["c1"].output()
        assert api.get("/readyz").status_code == 200


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*sustain_command(), *args], capture_output=True, text=True,
                          timeout=60, env=env, check=False)


def test_validate_accepts_the_example_and_refuses_a_broken_copy(tmp_path: Path) -> None:
    allowed = {**os.environ, "SUSTAIN_SECRET_ENV": "VLLM_API_KEY,WEBHOOK_SECRET,SLACK_*",
               "SUSTAIN_CONFIG_ENV": "VLLM_URL,VLLM_MODEL,GATEWAY_URL"}
    ok = run_cli("validate", str(EXAMPLE), env=allowed)
    assert ok.returncode == 0, ok.stderr
    unlisted = run_cli("validate", str(EXAMPLE),
                       env={k: v for k, v in allowed.items() if k != "SUSTAIN_SECRET_ENV"})
    assert unlisted.returncode == 1
    assert "auth_secret_ref: env:VLLM_API_KEY: not in SUSTAIN_SECRET_ENV" in unlisted.stderr
    broken = tmp_path / "broken.yaml"
    text = EXAMPLE.read_text()
    text = text.replace("schedule: {every: 30s, jitter: 5s}", "schedule: {every: 30s, jitter: 5}")
    text = text.replace("    max_tokens: 64\n", "    max_tokens: 64\n    temprature: 0.2\n")
    broken.write_text(text + "probes: []\n")
    bad = run_cli("validate", str(broken), env=allowed)
    assert bad.returncode == 1
    lines = bad.stderr.strip().splitlines()
    assert lines, bad.stderr
    assert all(line.startswith(f"{broken}:") for line in lines), lines
    assert any("duplicate key" in line for line in lines), lines

    broken.write_text(text)
    bad = run_cli("validate", str(broken), env=allowed)
    assert bad.returncode == 1
    (line,) = bad.stderr.strip().splitlines()
    number = text.splitlines().index("    temprature: 0.2") + 1
    assert line == f"{broken}:{number}: workloads[0].temprature: unknown field"


def test_serve_refuses_a_broken_config_before_starting(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(BROKEN)
    result = run_cli("serve", "--config", str(broken), "--database-url",
                     "postgresql://nobody@127.0.0.1:9/none",
                     env={"SIM_URL": "http://x/v1", "SUSTAIN_CONFIG_ENV": "SIM_URL",
                          "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2
    assert f"{broken}:14: probes[0].colour: unknown field" in result.stderr


ADMIN_KEY_LABEL = """\
version: 1
endpoints:
  - name: sim
    base_url: http://127.0.0.1:9/v1
    model: m
    labels: {owner: "${SUSTAIN_ADMIN_KEY}"}
"""


def test_validate_and_serve_refuse_a_config_that_expands_the_admin_key(tmp_path: Path) -> None:
    """Whoever edits the file must not get the admin key into a label (shown to viewers and
    in /metrics) by naming its variable, whatever SUSTAIN_CONFIG_ENV allows; the error names
    the variable at its line, never its value."""
    config = tmp_path / "sustain.yaml"
    config.write_text(ADMIN_KEY_LABEL)
    key = "sk_sustain_GkpUulWzwJXiwbGA4XlqVJhAstehuU53ztfrvFLoLuk"
    env = {"PATH": "/usr/bin:/bin", "SUSTAIN_ADMIN_KEY": key, "SUSTAIN_CONFIG_ENV": "*"}
    refused = (f"{config}:6: endpoints[0].labels.owner: environment variable "
               "SUSTAIN_ADMIN_KEY may not be expanded")
    validated = run_cli("validate", str(config), env=env)
    assert validated.returncode == 1
    assert refused in validated.stderr
    served = run_cli("serve", "--config", str(config), "--database-url",
                     "postgresql://nobody@127.0.0.1:9/none", env=env)
    assert served.returncode == 2
    assert refused in served.stderr
    for result in (validated, served):
        assert key not in result.stdout + result.stderr
        assert key[len("sk_sustain_"):] not in result.stdout + result.stderr


def test_validate_expands_only_what_sustain_config_env_lists(tmp_path: Path) -> None:
    config = tmp_path / "sustain.yaml"
    config.write_text(ADMIN_KEY_LABEL.replace("SUSTAIN_ADMIN_KEY", "TEAM"))
    env = {"PATH": "/usr/bin:/bin", "TEAM": "inference"}
    unlisted = run_cli("validate", str(config), env=env)
    assert unlisted.returncode == 1
    assert "environment variable TEAM may not be expanded: not in SUSTAIN_CONFIG_ENV" \
        in unlisted.stderr
    listed = run_cli("validate", str(config), env={**env, "SUSTAIN_CONFIG_ENV": "TE*"})
    assert listed.returncode == 0, listed.stderr
