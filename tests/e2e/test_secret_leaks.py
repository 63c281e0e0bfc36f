"""No secret leaves where it belongs. A live `sustain serve` (debug logs) holds an endpoint API
key (env reference), a webhook signing secret, its bootstrap admin key and named keys; after a
run, sign-ins, failed calls and every listing, none of those values appears in any response,
the log, /metrics, or any row of any table of the database."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncpg
import httpx

from tests.conftest import asyncpg_dsn
from tests.processes import TEST_ADMIN_KEY, SustainProcess, admin_client, free_port

ENDPOINT_KEY = "sk-leak-endpoint-7d1c9e0b5a4f"
SIGNING_SECRET = "whsec-leak-3b8e2f6a91c0"


async def database_text(database_url: str) -> str:
    """Every row of every table (partitions included) as text: a dump without pg_dump, whose
    version would have to match the server's."""
    connection = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        tables = [r["tablename"] for r in await connection.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        parts: list[str] = []
        for table in tables:
            rows = await connection.fetch(f'SELECT t::text AS row FROM "{table}" t')
            parts.extend(r["row"] for r in rows)
        return "\n".join(parts)
    finally:
        await connection.close()


def test_secrets_and_keys_appear_in_no_response_log_metric_or_row(
        tmp_path: Path, database_url: str) -> None:
    sim_port, port = free_port(), free_port()
    simulator = SustainProcess(
        ["simulate", "--port", str(sim_port), "--ttft-ms", "5", "--itl-ms", "1",
         "--output-tokens", "4", "--api-key-env", "LEAK_ENDPOINT_KEY"],
        tmp_path / "simulator.log", env={"LEAK_ENDPOINT_KEY": ENDPOINT_KEY})
    service = SustainProcess(["serve", "--port", str(port)], tmp_path / "serve.log", env={
        "SUSTAIN_DATABASE_URL": database_url, "SUSTAIN_LOG_LEVEL": "debug",
        "SUSTAIN_SECRET_ENV": "LEAK_*", "LEAK_ENDPOINT_KEY": ENDPOINT_KEY,
        "LEAK_SIGNING_SECRET": SIGNING_SECRET})
    base = f"http://127.0.0.1:{port}"
    seen: list[str] = []
    with simulator, service, admin_client(base) as api:
        simulator.wait_http(f"http://127.0.0.1:{sim_port}/v1/models", status=401)
        service.wait_http(f"{base}/readyz")

        def call(method: str, path: str, **kwargs: object) -> httpx.Response:
            r = api.request(method, path, **kwargs)  # type: ignore[arg-type]
            seen.append(f"{r.status_code} {dict(r.headers)} {r.text}")
            return r

        # the answer that creates a key is the one place it is shown: not collected
        keys = {role: api.post("/api/v1/keys", json={"name": role, "role": role}).json()
                ["key"] for role in ("viewer", "editor")}
        endpoint = call("POST", "/api/v1/endpoints", json={
            "name": "sim", "base_url": f"http://127.0.0.1:{sim_port}/v1", "model": "sim-model",
            "auth_secret_ref": "env:LEAK_ENDPOINT_KEY"}).json()
        probe = call("POST", "/api/v1/probes", json={
            "name": "leak", "endpoint_id": endpoint["id"], "interval_s": 3600,
            "enabled": False, "workload": {"max_tokens": 4},
            "profile": {"kind": "constant", "rate": 5, "duration_s": 1}},
            headers={"Authorization": f"Bearer {keys['editor']}"}).json()
        call("POST", "/api/v1/notifiers", json={
            "name": "hook", "kind": "webhook", "url": f"http://127.0.0.1:{free_port()}/hook",
            "signing_secret_ref": "env:LEAK_SIGNING_SECRET"})
        run = call("POST", f"/api/v1/probes/{probe['id']}/runs").json()
        deadline = time.monotonic() + 30  # a hang guard only
        while call("GET", f"/api/v1/runs/{run['id']}").json()["status"] in ("pending",
                                                                            "running"):
            assert time.monotonic() < deadline, service.output()[-3000:]
            time.sleep(0.2)
        assert call("GET", f"/api/v1/runs/{run['id']}").json()["status"] == "succeeded"

        # failures that echo what they were given must not echo keys
        call("GET", "/api/v1/probes", headers={"Authorization": f"Bearer {keys['viewer']}x"})
        call("POST", "/api/v1/keys", json={"name": "x", "role": "admin"},
             headers={"Authorization": f"Bearer {keys['viewer']}"})
        call("POST", "/login", content=f"key={keys['viewer']}",
             headers={"content-type": "application/x-www-form-urlencoded"})
        call("POST", "/login", content=f"key={keys['viewer']}0",
             headers={"content-type": "application/x-www-form-urlencoded"})
        for path in ("/api/v1/endpoints", "/api/v1/probes", "/api/v1/notifiers",
                     "/api/v1/runs", f"/api/v1/runs/{run['id']}/samples", "/api/v1/keys",
                     "/api/v1/audit", "/api/v1/replicas", "/api/v1/deliveries", "/metrics",
                     "/openapi.json", "/"):
            call("GET", path)
    secrets = {"endpoint key": ENDPOINT_KEY, "signing secret": SIGNING_SECRET,
               "admin key": TEST_ADMIN_KEY, **{f"{r} key": k for r, k in keys.items()}}
    places = {"responses": "\n".join(seen), "log": service.output(),
              "database": asyncio.run(database_text(database_url))}
    assert len(places["log"]) > 1000  # debug logging was on
    leaks = [f"{name} in {place}" for name, value in secrets.items()
             for place, text in places.items() if value in text]
    assert leaks == []
