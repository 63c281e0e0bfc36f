"""A workload's tokenizer is read as a dataset is, and an `http` check's body_contains only
reads listed targets: both refused at create and update with a 422 naming the field, and
judged again when a run reads the file or sends the check (the file or the settings may have
changed since), failing the run with the real reason."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import SimulatorHandle, asyncpg_dsn
from tests.integration.service.helpers import create_endpoint, create_probe
from tests.integration.service.test_endpoint_bounds import listed
from tests.integration.service.test_reach import app_with, refused, run_now
from tests.unit.probes.workload.test_tokenizer_files import write_tokenizer


def probe_body(endpoint_id: int, **workload: Any) -> dict[str, Any]:
    return {"name": "p", "endpoint_id": endpoint_id, "interval_s": 60,
            "workload": workload}


# --- tokenizer ---------------------------------------------------------------------------


async def test_without_a_dataset_dir_no_tokenizer_may_be_named(
        api: httpx.AsyncClient, tmp_path: Path) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
    for tokenizer in ("/etc/shadow", str(write_tokenizer(tmp_path / "tokenizer.json"))):
        message = refused(await api.post("/api/v1/probes", json=probe_body(
            endpoint["id"], tokenizer=tokenizer)), "workload.tokenizer")
        assert "SUSTAIN_DATASET_DIR is unset" in message
    assert await listed(api, "/api/v1/probes") == []


async def test_a_tokenizer_outside_the_dataset_dir_is_refused_at_create_and_update(
        database_url: str, tmp_path: Path) -> None:
    allowed = tmp_path / "datasets"
    allowed.mkdir()
    inside = write_tokenizer(allowed / "tokenizer.json")
    outside = write_tokenizer(tmp_path / "outside.json")
    (allowed / "escape.json").symlink_to(outside)
    async with app_with(database_url, dataset_dir=allowed) as api:
        endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
        for tokenizer in ("/etc/shadow", str(outside), str(allowed / "escape.json"),
                          f"{allowed}/../outside.json", "/dev/zero"):
            refused(await api.post("/api/v1/probes", json=probe_body(
                endpoint["id"], tokenizer=tokenizer)), "workload.tokenizer")
        assert await listed(api, "/api/v1/probes") == []
        probe = await create_probe(api, endpoint["id"], workload={"tokenizer": str(inside)})
        refused(await api.patch(f"/api/v1/probes/{probe['id']}", json={
            "workload": {"tokenizer": str(outside)}}), "workload.tokenizer")
        stored = (await api.get(f"/api/v1/probes/{probe['id']}")).json()
        assert stored["workload"]["tokenizer"] == str(inside)


async def test_a_tokenizer_is_checked_again_when_a_run_reads_it(
        database_url: str, simulator: SimulatorHandle, tmp_path: Path) -> None:
    allowed = tmp_path / "datasets"
    allowed.mkdir()
    path = allowed / "tokenizer.json"
    write_tokenizer(path)
    cap = path.stat().st_size + 1024
    outside = write_tokenizer(tmp_path / "outside.json")
    async with app_with(database_url, dataset_dir=allowed, dataset_max_bytes=cap) as api:
        endpoint = await create_endpoint(api, simulator.base_url)
        probe = await create_probe(api, endpoint["id"], enabled=False,
                                   workload={"tokenizer": str(path), "input_tokens": 8})
        assert (await run_now(api, probe["id"]))["status"] == "succeeded"

        replacements: list[tuple[str, Any]] = [
            ("a link out of the directory", lambda: path.symlink_to(outside)),
            ("a file beyond the cap", lambda: path.write_text(" " * (cap + 1))),
            ("a FIFO", lambda: os.mkfifo(path)),
            ("a broken tokenizer", lambda: path.write_text('{"model": {"type": "BPE"')),
        ]
        errors = {}
        for what, replace in replacements:
            path.unlink()
            replace()
            run = await run_now(api, probe["id"])
            assert run["status"] == "failed", what
            errors[what] = run["error"]
    assert errors == {
        "a link out of the directory":
            f"tokenizer {path}: not under SUSTAIN_DATASET_DIR ({allowed})",
        "a file beyond the cap": f"tokenizer {path}: larger than {cap:,} bytes",
        "a FIFO": f"tokenizer {path}: not a regular file",
        "a broken tokenizer": errors["a broken tokenizer"],
    }
    assert errors["a broken tokenizer"].startswith(f"tokenizer {path}: not a tokenizer file (")
    assert "internal error" not in errors["a broken tokenizer"]


# --- body_contains -----------------------------------------------------------------------


def health_check(simulator: SimulatorHandle, **check: Any) -> dict[str, Any]:
    return {"base_url": simulator.base_url.removesuffix("/v1"), "api_kind": "http",
            "model": "n/a", "http_check": {"path": "/health", **check}}


async def test_without_an_allow_list_body_contains_is_refused_naming_the_field(
        api: httpx.AsyncClient, simulator: SimulatorHandle) -> None:
    for url in (simulator.base_url.removesuffix("/v1"), "http://10.0.0.1", "http://db:5432"):
        message = refused(await api.post("/api/v1/endpoints", json={
            "name": "oracle", "base_url": url, "model": "n/a", "api_kind": "http",
            "http_check": {"path": "/", "body_contains": "secret"}}),
            "http_check.body_contains")
        assert "SUSTAIN_ALLOWED_TARGETS" in message
    assert await listed(api, "/api/v1/endpoints") == []
    status_only = await api.post("/api/v1/endpoints", json={
        "name": "status", **health_check(simulator)})
    assert status_only.status_code == 201, status_only.text


async def test_body_contains_is_allowed_on_listed_targets_and_judged_again_at_run_time(
        database_url: str, simulator: SimulatorHandle) -> None:
    async with app_with(database_url, allowed_targets="10.0.0.0/8") as api:
        refused(await api.post("/api/v1/endpoints", json={
            "name": "h", **health_check(simulator, body_contains="ok")}), "base_url")
    async with app_with(database_url, allowed_targets="127.0.0.0/8") as api:
        endpoint = await create_endpoint(api, **health_check(simulator, body_contains="ok"))
        probe = await create_probe(api, endpoint["id"], enabled=False)
        run = await run_now(api, probe["id"])
        assert run["status"] == "succeeded", run
    async with app_with(database_url) as api:  # the allow-list emptied since
        run = await run_now(api, probe["id"])
    assert run["status"] == "failed"
    assert run["summary"]["errors"] == {"egress_denied": 1}


@pytest.mark.parametrize("header", ["Content-Length", "Transfer-Encoding", "host",
                                    "CONNECTION"])
async def test_an_endpoint_saved_with_a_client_header_still_runs_without_it(
        database_url: str, simulator: SimulatorHandle, header: str) -> None:
    """An endpoint stored before such headers were refused: the client frames its own
    requests (a `Content-Length: 5` beside the real body once failed the run as an internal
    error)."""
    async with app_with(database_url) as api:
        endpoint = await create_endpoint(api, simulator.base_url)
        probe = await create_probe(api, endpoint["id"], enabled=False)
        connection = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            await connection.execute("UPDATE endpoints SET headers = $1::jsonb WHERE id = $2",
                                     json.dumps({header: "5"}), endpoint["id"])
        finally:
            await connection.close()
        run = await run_now(api, probe["id"])
    assert run["status"] == "succeeded", run


# --- a RAG probe's corpus -------------------------------------------------------------------


async def test_a_rag_corpus_outside_the_dataset_dir_is_refused_naming_it(
        database_url: str, tmp_path: Path) -> None:
    allowed = tmp_path / "datasets"
    allowed.mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"id": "a", "text": "words"}\n')
    async with app_with(database_url, dataset_dir=allowed) as api:
        endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1")
        embed = await create_endpoint(api, "http://127.0.0.1:9/v1", name="emb",
                                      api_kind="openai-embeddings")
        for corpus in ("/etc/shadow", str(tmp_path / "corpus.jsonl")):
            refused(await api.post("/api/v1/probes", json=probe_body(
                endpoint["id"], rag={"corpus": corpus}) | {
                    "rag_endpoints": {"embed_endpoint_id": embed["id"]}}),
                "workload.rag.corpus")
        assert await listed(api, "/api/v1/probes") == []
