"""What endpoints, notifiers and workloads may read and reach: cloud metadata and
link-local targets in every spelling, secret references the operator did not allow, and
datasets outside SUSTAIN_DATASET_DIR are refused at create and update with a 422 naming the
field; what settings refuse later fails the run or the delivery with a clear error; and a name
that resolves to a denied address is refused when the connection is opened."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from sustain.service.alerting.delivery import DeliveryWorker
from sustain.service.app import create_app, runtime_of
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    app_settings,
    create_endpoint,
    create_probe,
    serving,
    wait_for_run,
)
from tests.integration.service.test_notifications import FAST, move
from tests.receivers import Receiver

METADATA_URLS = [
    "http://169.254.169.254/latest/meta-data/",
    "http://2852039166/v1",
    "http://0xa9fea9fe/v1",
    "http://0251.0376.0251.0376/v1",
    "http://169.254.43518/v1",
    "http://[::ffff:a9fe:a9fe]/v1",
    "http://[::ffff:169.254.169.254]/v1",
    "http://[fe80::1]/v1",
    "http://[fd00:ec2::254]/latest",
    "http://100.100.100.200/latest/meta-data",
    "http://metadata.google.internal/computeMetadata/v1",
    "http://METADATA.google.internal./computeMetadata/v1",
    "http://metadata/computeMetadata/v1",
    "http://instance-data/latest/meta-data",
]


@asynccontextmanager
async def app_with(database_url: str, **fields: Any) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process app with these settings (and an idle alert evaluator and notifier)."""
    app = create_app(app_settings(database_url, auto_migrate=False, notify_poll_s=60,
                                  alert_evaluation_s=3600, **fields))
    async with serving(app) as client:
        client.app = app  # type: ignore[attr-defined]
        yield client


def refused(r: httpx.Response, field: str) -> str:
    """The problem's message for `field`, after checking it is a 422 naming it."""
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    errors = {e["field"]: e["message"] for e in r.json()["errors"]}
    assert field in errors, errors
    return str(errors[field])


async def run_now(api: httpx.AsyncClient, probe_id: int) -> dict[str, Any]:
    r = await api.post(f"/api/v1/probes/{probe_id}/runs")
    assert r.status_code == 202, r.text
    return await wait_for_run(api, int(r.json()["id"]))


# --- egress at create and update ---------------------------------------------------------


@pytest.mark.parametrize("url", METADATA_URLS)
async def test_an_endpoint_at_a_metadata_address_is_refused_naming_base_url(
        api: httpx.AsyncClient, url: str) -> None:
    message = refused(await api.post("/api/v1/endpoints", json={
        "name": "meta", "base_url": url, "model": "m"}), "base_url")
    assert "always denied" in message
    assert (await api.get("/api/v1/endpoints")).json()["items"] == []


@pytest.mark.parametrize("url", ["http://169.254.169.254", "http://[::ffff:a9fe:a9fe]",
                                 "http://metadata.google.internal"])
async def test_an_http_check_cannot_become_an_oracle_of_a_metadata_address(
        api: httpx.AsyncClient, url: str) -> None:
    refused(await api.post("/api/v1/endpoints", json={
        "name": "oracle", "base_url": url, "model": "n/a", "api_kind": "http",
        "http_check": {"path": "/latest/meta-data/iam/security-credentials/",
                       "body_contains": "AccessKeyId"}}), "base_url")


async def test_an_endpoint_cannot_be_moved_to_a_metadata_address(
        api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    refused(await api.patch(f"/api/v1/endpoints/{endpoint['id']}",
                            json={"base_url": "http://0xa9fea9fe/v1"}), "base_url")
    stored = (await api.get(f"/api/v1/endpoints/{endpoint['id']}")).json()
    assert stored["base_url"] == "http://127.0.0.1:9/v1"


@pytest.mark.parametrize("url", METADATA_URLS[:8])
async def test_a_notifier_at_a_metadata_address_is_refused_naming_url(
        api: httpx.AsyncClient, url: str) -> None:
    refused(await api.post("/api/v1/notifiers", json={
        "name": "hook", "kind": "webhook", "url": url}), "url")
    hook = await api.post("/api/v1/notifiers", json={
        "name": "hook", "kind": "alertmanager", "url": "http://127.0.0.1:9093"})
    assert hook.status_code == 201, hook.text
    refused(await api.patch(f"/api/v1/notifiers/{hook.json()['id']}", json={"url": url}),
            "url")


async def test_operator_lists_narrow_and_extend_what_may_be_reached(
        database_url: str) -> None:
    async with app_with(database_url, allowed_targets="10.0.0.0/8,*.inference.svc",
                        denied_targets="10.66.0.0/16") as api:
        for url in ("http://10.1.2.3:8000/v1", "http://vllm.inference.svc/v1"):
            r = await api.post("/api/v1/endpoints", json={
                "name": url.split("/")[2].replace(":", "-"), "base_url": url, "model": "m"})
            assert r.status_code == 201, r.text
        assert "not among the allowed targets" in refused(await api.post(
            "/api/v1/endpoints", json={"name": "x", "base_url": "http://192.168.1.1/v1",
                                       "model": "m"}), "base_url")
        assert "10.66.0.0/16" in refused(await api.post(
            "/api/v1/endpoints", json={"name": "x", "base_url": "http://10.66.1.1/v1",
                                       "model": "m"}), "base_url")
        assert "not among the allowed targets" in refused(await api.post(
            "/api/v1/notifiers", json={"name": "n", "kind": "webhook",
                                       "url": "http://192.168.1.1/h"}), "url")


# --- egress at connect time --------------------------------------------------------------


async def test_a_name_resolving_to_a_denied_address_fails_the_run_at_connect_time(
        database_url: str, simulator: SimulatorHandle) -> None:
    """`localhost` passes the create-time check (a name no rule names); it resolves into the
    denied 127.0.0.0/8, so every request of the run is refused when connecting."""
    port = simulator.base_url.split(":")[2].split("/")[0]
    async with app_with(database_url, denied_targets="127.0.0.0/8,::1/128") as api:
        refused(await api.post("/api/v1/endpoints", json={
            "name": "x", "base_url": simulator.base_url, "model": "m"}), "base_url")
        chat = await create_endpoint(api, f"http://localhost:{port}/v1", name="chat")
        check = await create_endpoint(api, f"http://localhost:{port}", name="check",
                                      api_kind="http", model="n/a",
                                      http_check={"path": "/v1/models"})
        for endpoint in (chat, check):
            probe = await create_probe(api, endpoint["id"], name=f"p-{endpoint['name']}",
                                       enabled=False)
            run = await run_now(api, probe["id"])
            assert run["status"] == "failed"
            assert run["summary"]["errors"] == {"egress_denied": 1}
    async with app_with(database_url) as api:  # the same endpoint, default policy: reached
        run = await run_now(api, probe["id"])
        assert run["status"] == "succeeded", run


async def test_a_notifier_whose_host_resolves_to_a_denied_address_fails_at_once(
        database_url: str) -> None:
    with Receiver() as receiver:
        async with app_with(database_url, denied_targets="127.0.0.0/8,::1/128") as api:
            hook = await api.post("/api/v1/notifiers", json={
                "name": "hook", "kind": "webhook", "timeout_s": 1,
                "url": f"http://localhost:{receiver.port}/h"})
            assert hook.status_code == 201, hook.text
            app = api.app  # type: ignore[attr-defined]
            state = runtime_of(app)
            worker = DeliveryWorker(state.sessions, state.notify_client, "w1", "http://x",
                                    FAST, reach=state.reach)
            await move(app, True, datetime.now(UTC))
            await worker.drain()
            (delivery,) = (await api.get("/api/v1/deliveries")).json()["items"]
        assert delivery["state"] == "failed"
        assert delivery["attempts"] == 1
        assert delivery["last_error"].startswith("egress denied")
        assert receiver.answered() == []


async def test_a_secret_notifier_url_the_policy_refuses_fails_without_naming_it(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_SLACK_URL", "http://169.254.169.254/services/T0/B0/s3cret")
    async with app_with(database_url) as api:
        slack = await api.post("/api/v1/notifiers", json={
            "name": "slack", "kind": "slack", "url_secret_ref": "env:TEST_SLACK_URL"})
        assert slack.status_code == 201, slack.text  # the URL is a secret: judged at delivery
        app = api.app  # type: ignore[attr-defined]
        state = runtime_of(app)
        worker = DeliveryWorker(state.sessions, state.notify_client, "w1", "http://x", FAST,
                                reach=state.reach)
        await move(app, True, datetime.now(UTC))
        await worker.drain()
        (delivery,) = (await api.get("/api/v1/deliveries")).json()["items"]
    assert delivery["state"] == "failed"
    assert delivery["last_error"] == "egress denied: the URL of env:TEST_SLACK_URL is not " \
        "allowed (SUSTAIN_ALLOWED_TARGETS / SUSTAIN_DENIED_TARGETS)"
    assert "169.254" not in json.dumps(delivery)


# --- secret references -------------------------------------------------------------------


@pytest.mark.parametrize(("ref", "why"), [
    ("env:SUSTAIN_DATABASE_URL", "never readable"),
    ("env:SUSTAIN_ADMIN_KEY", "never readable"),
    ("env:DATABASE_URL", "never readable"),
    ("env:PGPASSWORD", "never readable"),
    ("env:HOME", "not in SUSTAIN_SECRET_ENV"),
    ("file:/proc/self/environ", "never readable"),
    ("file:/etc/passwd", "not under SUSTAIN_SECRET_DIR"),
])
async def test_a_secret_reference_the_policy_refuses_is_a_422_naming_the_field(
        api: httpx.AsyncClient, ref: str, why: str) -> None:
    message = refused(await api.post("/api/v1/endpoints", json={
        "name": "e", "base_url": "http://127.0.0.1:9/v1", "model": "m",
        "auth_secret_ref": ref}), "auth_secret_ref")
    assert ref in message
    assert why in message
    for field in ("signing_secret_ref", "url_secret_ref"):
        body = {"name": "n", "kind": "webhook", field: ref}
        if field == "signing_secret_ref":
            body["url"] = "http://127.0.0.1:9/h"
        assert why in refused(await api.post("/api/v1/notifiers", json=body), field)
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    refused(await api.patch(f"/api/v1/endpoints/{endpoint['id']}",
                            json={"auth_secret_ref": ref}), "auth_secret_ref")


async def test_an_allowed_name_holding_the_database_url_is_refused(
        api: httpx.AsyncClient, database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_INNOCENT", database_url)
    message = refused(await api.post("/api/v1/endpoints", json={
        "name": "e", "base_url": "http://127.0.0.1:9/v1", "model": "m",
        "auth_secret_ref": "env:TEST_INNOCENT"}), "auth_secret_ref")
    assert "own credentials" in message
    assert database_url not in message


async def test_file_references_resolve_under_the_secret_dir(
        database_url: str, simulator: SimulatorHandle, tmp_path: Path) -> None:
    (tmp_path / "sim-key").write_text("sk-file-key\n")
    async with app_with(database_url, secret_dir=tmp_path) as api:
        endpoint = await create_endpoint(api, simulator.base_url,
                                         auth_secret_ref=f"file:{tmp_path}/sim-key")
        probe = await create_probe(api, endpoint["id"], enabled=False)
        assert (await run_now(api, probe["id"]))["status"] == "succeeded"
        refused(await api.post("/api/v1/endpoints", json={
            "name": "e2", "base_url": simulator.base_url, "model": "m",
            "auth_secret_ref": f"file:{tmp_path}/../elsewhere"}), "auth_secret_ref")


async def test_a_reference_the_settings_no_longer_allow_fails_the_run_naming_it(
        database_url: str, simulator: SimulatorHandle,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_SIM_KEY", "sk-sim")
    async with app_with(database_url) as api:
        endpoint = await create_endpoint(api, simulator.base_url,
                                         auth_secret_ref="env:TEST_SIM_KEY")
        probe = await create_probe(api, endpoint["id"], enabled=False)
        assert (await run_now(api, probe["id"]))["status"] == "succeeded"
    async with app_with(database_url, secret_env="OTHER_*") as api:
        run = await run_now(api, probe["id"])
    assert run["status"] == "failed"
    assert run["error"] == "secret reference env:TEST_SIM_KEY: not in SUSTAIN_SECRET_ENV"
    assert "sk-sim" not in json.dumps(run)


# --- datasets ----------------------------------------------------------------------------


def write_dataset(path: Path, lines: int = 3) -> Path:
    path.write_text("".join(json.dumps({"prompt": f"p{i}"}) + "\n" for i in range(lines)))
    return path


async def test_without_a_dataset_dir_no_dataset_may_be_named(
        api: httpx.AsyncClient, tmp_path: Path) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    for dataset in (str(write_dataset(tmp_path / "d.jsonl")), "/dev/zero",
                    "/proc/self/environ"):
        refused(await api.post("/api/v1/probes", json={
            "name": "p", "endpoint_id": endpoint["id"], "interval_s": 60,
            "workload": {"dataset": dataset}}), "workload.dataset")
    assert (await api.get("/api/v1/probes")).json()["items"] == []


async def test_datasets_are_read_from_the_dataset_dir_only_and_up_to_the_cap(
        database_url: str, simulator: SimulatorHandle, tmp_path: Path) -> None:
    allowed = tmp_path / "datasets"
    allowed.mkdir()
    good = write_dataset(allowed / "prompts.jsonl")
    big = write_dataset(allowed / "big.jsonl", lines=200)
    outside = write_dataset(tmp_path / "outside.jsonl")
    (allowed / "escape.jsonl").symlink_to(outside)
    async with app_with(database_url, dataset_dir=allowed, dataset_max_bytes=1024) as api:
        endpoint = await create_endpoint(api, simulator.base_url)
        probe = await create_probe(api, endpoint["id"], enabled=False,
                                   workload={"dataset": str(good)})
        assert (await run_now(api, probe["id"]))["status"] == "succeeded"
        for dataset in (str(outside), str(allowed / "escape.jsonl"), "/dev/zero",
                        f"{allowed}/../outside.jsonl"):
            refused(await api.patch(f"/api/v1/probes/{probe['id']}",
                                    json={"workload": {"dataset": dataset}}),
                    "workload.dataset")
        oversized = await create_probe(api, endpoint["id"], name="big", enabled=False,
                                       workload={"dataset": str(big)})
        run = await run_now(api, oversized["id"])
        assert run["status"] == "failed"
        assert run["error"] == f"{big}: larger than 1,024 bytes"
    async with app_with(database_url) as api:  # SUSTAIN_DATASET_DIR unset since
        run = await run_now(api, probe["id"])
    assert run["status"] == "failed"
    assert run["error"] == f"{good}: datasets are not allowed (SUSTAIN_DATASET_DIR is unset)"


async def test_a_trace_is_read_from_the_dataset_dir_only_and_replayed_from_there(
        database_url: str, simulator: SimulatorHandle, tmp_path: Path) -> None:
    allowed = tmp_path / "traces"
    allowed.mkdir()
    rows = [{"timestamp": 100 * i, "input_length": 16, "output_length": 4} for i in range(5)]
    for where in (allowed / "t.jsonl", tmp_path / "outside.jsonl"):
        where.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    async with app_with(database_url, dataset_dir=allowed) as api:
        endpoint = await create_endpoint(api, simulator.base_url)
        refused(await api.post("/api/v1/probes", json={
            "name": "t", "endpoint_id": endpoint["id"], "interval_s": 60,
            "profile": {"kind": "trace", "path": str(tmp_path / "outside.jsonl")}}),
            "profile.path")
        probe = await create_probe(api, endpoint["id"], enabled=False, profile={
            "kind": "trace", "path": str(allowed / "t.jsonl"), "speedup": 2})
        run = await run_now(api, probe["id"])
        assert run["status"] == "succeeded", run
        assert run["summary"]["attempts"] == 5
        assert run["summary"]["stages"][0]["label"] == "trace 5 requests x2"


async def test_a_sessions_file_is_read_from_the_dataset_dir_and_played_by_the_service(
        database_url: str, simulator: SimulatorHandle, tmp_path: Path) -> None:
    allowed = tmp_path / "sessions"
    allowed.mkdir()
    example = Path(__file__).parents[3] / "examples" / "sessions" / "agentic.jsonl"
    (allowed / "agentic.jsonl").write_text(example.read_text())
    (tmp_path / "outside.jsonl").write_text(example.read_text())
    closed = {"kind": "concurrency", "users": 3, "duration_s": 60}
    async with app_with(database_url, dataset_dir=allowed) as api:
        endpoint = await create_endpoint(api, simulator.base_url)
        refused(await api.post("/api/v1/probes", json={
            "name": "s", "endpoint_id": endpoint["id"], "interval_s": 60,
            "profile": closed, "workload": {"sessions": str(tmp_path / "outside.jsonl")}}),
            "workload.sessions")
        refused(await api.post("/api/v1/probes", json={
            "name": "s", "endpoint_id": endpoint["id"], "interval_s": 60,
            "profile": {"kind": "constant", "rate": 1, "duration_s": 1},
            "workload": {"turns": 3}}), "workload.turns")
        probe = await create_probe(api, endpoint["id"], enabled=False, profile=closed,
                                   workload={"sessions": str(allowed / "agentic.jsonl")})
        refused(await api.patch(f"/api/v1/probes/{probe['id']}", json={
            "profile": {"kind": "poisson", "rate": 1, "duration_s": 1}}), "workload.sessions")
        run = await run_now(api, probe["id"])
        assert run["status"] == "succeeded", run
        assert run["summary"]["sessions"] == {"conversations": 3, "completed": 3, "turns": 9,
                                              "failed_turns": 0}
        page = (await api.get(f"/api/v1/runs/{run['id']}/samples")).json()
        assert sorted({s["conversation"] for s in page["items"]}) == ["agent", "chat",
                                                                       "support"]
        assert sorted(s["turn"] for s in page["items"]) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
