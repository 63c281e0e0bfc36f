"""RAG probes in the service: created over REST or from the config file with their embeddings
and rerank endpoints, run by the service like any probe (every stage, the hit rate and the
stored samples), refused with a 422 naming the field when their endpoints do not fit, and
their endpoints kept from deletion while they refer to them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from sustain.service.app import create_app, runtime_of
from sustain.service.config_file.load import parse
from sustain.service.config_file.sync import sync
from sustain.service.config_file.yaml_lines import ConfigError
from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import (
    app_settings,
    create_endpoint,
    create_probe,
    samples_of,
    serving,
    wait_for_run,
)

PASSAGES = 30


@pytest.fixture
def datasets(tmp_path: Path) -> Path:
    """SUSTAIN_DATASET_DIR, holding `corpus.jsonl`: passages of distinct words each."""
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(
        {"id": f"doc-{k}", "text": " ".join(f"w{k}x{j}" for j in range(20))}) + "\n"
        for k in range(PASSAGES)))
    return tmp_path


@pytest.fixture
def app(database_url: str, datasets: Path) -> FastAPI:
    return create_app(app_settings(database_url, auto_migrate=False, dataset_dir=datasets))


@pytest.fixture
async def api(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(app) as client:
        yield client


def rag_workload(datasets: Path, **fields: Any) -> dict[str, Any]:
    return {"max_tokens": 8, "rag": {"corpus": str(datasets / "corpus.jsonl"), "top_k": 3,
                                     **fields}}


async def endpoints(api: httpx.AsyncClient, base_url: str) -> dict[str, int]:
    """A chat, an embeddings and a rerank endpoint, all at `base_url`: their ids by kind."""
    return {kind: (await create_endpoint(api, base_url, name=f"e-{kind}", api_kind=kind))["id"]
            for kind in ("openai-chat", "openai-embeddings", "rerank")}


async def test_a_rag_probe_created_over_rest_runs_every_stage(
        api: httpx.AsyncClient, simulator: SimulatorHandle, datasets: Path) -> None:
    ids = await endpoints(api, simulator.base_url)
    probe = await create_probe(
        api, ids["openai-chat"], enabled=False,
        workload=rag_workload(datasets, rerank_top_n=2),
        rag_endpoints={"embed_endpoint_id": ids["openai-embeddings"],
                       "rerank_endpoint_id": ids["rerank"]},
        profile={"kind": "constant", "rate": 10, "duration_s": 0.4})
    assert probe["rag_endpoints"] == {"embed_endpoint_id": ids["openai-embeddings"],
                                      "rerank_endpoint_id": ids["rerank"]}
    run = await wait_for_run(api, (await api.post(f"/api/v1/probes/{probe['id']}/runs")
                                   ).json()["id"])
    assert run["status"] == "succeeded", run
    summary = run["summary"]
    assert summary["attempts"] == summary["successes"] == 4
    assert set(summary["rag_stages_ms"]) == {"embed", "retrieve", "rerank", "generate_ttft",
                                             "generate", "overhead"}
    assert summary["rag_stages_ms"]["generate_ttft"]["p50"] >= 50.0, "the simulator's TTFT"
    assert summary["ttft_ms"]["p50"] > summary["rag_stages_ms"]["generate_ttft"]["p50"], \
        "TTFT counts from the question, before embedding and reranking"
    assert summary["retrieval_checked"] == 4
    assert summary["retrieval_hit_ratio"] is not None
    samples = (await api.get(f"/api/v1/runs/{run['id']}/samples")).json()["items"]
    assert len(samples) == 4
    assert all(sample["error_class"] is None for sample in samples)

    # over a window, as the run said: the hit rate and every stage's percentiles
    window = (await api.get(f"/api/v1/probes/{probe['id']}/summary")).json()
    assert window["retrieval_checked"] == 4
    assert window["retrieval_hit_ratio"] == pytest.approx(summary["retrieval_hit_ratio"])
    for stage in ("embed", "retrieve", "rerank", "overhead"):
        merged, exact = window["metrics"][f"rag_{stage}"], summary["rag_stages_ms"][stage]
        assert merged["count"] == 4
        assert merged["mean"] == pytest.approx(exact["mean"])
    series = (await api.get(f"/api/v1/probes/{probe['id']}/series",
                            params={"stat": "retrieval_hit_rate"})).json()
    assert series["unit"] == "ratio"
    assert [point["value"] for point in series["points"]] == \
        [pytest.approx(summary["retrieval_hit_ratio"])]
    compared = (await api.get("/api/v1/compare", params={"probe": probe["name"]})).json()
    assert compared["probes"][0]["retrieval_hit_ratio"] == \
        pytest.approx(summary["retrieval_hit_ratio"])
    exported = samples_of((await api.get("/metrics")).text)
    assert [value for labels, value in exported["sustain_probe_last_run_retrieval_hit_ratio"]
            if labels["probe"] == probe["name"]] == [pytest.approx(summary["retrieval_hit_ratio"])]
    stages = {labels["stage"] for labels, _ in
              exported["sustain_probe_last_run_rag_stage_seconds"]}
    assert stages == {"embed", "retrieve", "rerank", "generate_ttft", "generate", "overhead"}


async def test_a_rag_probe_whose_embeddings_endpoint_fails_fails_its_run_naming_the_corpus(
        api: httpx.AsyncClient, datasets: Path) -> None:
    chat = await create_endpoint(api, "http://127.0.0.1:9/v1", name="gen")
    embed = await create_endpoint(api, "http://127.0.0.1:9/v1", name="emb",
                                  api_kind="openai-embeddings", timeout_connect_s=1)
    probe = await create_probe(api, chat["id"], enabled=False, workload=rag_workload(datasets),
                               rag_endpoints={"embed_endpoint_id": embed["id"]},
                               profile={"kind": "constant", "rate": 10, "duration_s": 0.2})
    run = await wait_for_run(api, (await api.post(f"/api/v1/probes/{probe['id']}/runs")
                                   ).json()["id"])
    assert run["status"] == "failed"
    assert run["error"].startswith("the rag corpus could not be embedded: connect")


@pytest.mark.parametrize(("change", "field"), [
    ({"rag_endpoints": None}, "rag_endpoints"),
    ({"workload": {"max_tokens": 8}}, "rag_endpoints"),
    ({"rag_endpoints": {"embed_endpoint_id": "chat"}}, "rag_endpoints.embed_endpoint_id"),
    ({"rag_endpoints": {"embed_endpoint_id": "embed", "rerank_endpoint_id": "embed"}},
     "rag_endpoints.rerank_endpoint_id"),
    ({"rag_endpoints": {"embed_endpoint_id": "embed", "rerank_endpoint_id": 999999}},
     "rag_endpoints.rerank_endpoint_id"),
    ({"endpoint_id": "embed"}, "endpoint_id"),
])
async def test_rag_endpoints_that_do_not_fit_answer_422_naming_the_field(
        api: httpx.AsyncClient, datasets: Path, change: dict[str, Any], field: str) -> None:
    ids = {"chat": (await create_endpoint(api, "http://127.0.0.1:9/v1", name="gen"))["id"],
           "embed": (await create_endpoint(api, "http://127.0.0.1:9/v1", name="emb",
                                           api_kind="openai-embeddings"))["id"]}

    def resolved(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: resolved(v) for k, v in value.items()}
        return ids.get(value, value) if isinstance(value, str) else value

    body = {"name": "rag", "endpoint_id": ids["chat"], "interval_s": 60,
            "workload": rag_workload(datasets),
            "rag_endpoints": {"embed_endpoint_id": ids["embed"]}}
    r = await api.post("/api/v1/probes", json=body | resolved(change))
    assert r.status_code == 422, r.text
    assert field in [e["field"] for e in r.json()["errors"]]
    assert (await api.get("/api/v1/probes")).json()["items"] == []

    probe = (await api.post("/api/v1/probes", json=body)).json()
    r = await api.patch(f"/api/v1/probes/{probe['id']}", json=resolved(change))
    assert r.status_code == 422, r.text
    assert field in [e["field"] for e in r.json()["errors"]]
    assert (await api.get(f"/api/v1/probes/{probe['id']}")).json() == probe


async def test_a_probe_stops_being_rag_when_both_go_in_one_patch(
        api: httpx.AsyncClient, datasets: Path) -> None:
    chat = await create_endpoint(api, "http://127.0.0.1:9/v1", name="gen")
    embed = await create_endpoint(api, "http://127.0.0.1:9/v1", name="emb",
                                  api_kind="openai-embeddings")
    probe = await create_probe(api, chat["id"], enabled=False, workload=rag_workload(datasets),
                               rag_endpoints={"embed_endpoint_id": embed["id"]})
    assert (await api.delete(f"/api/v1/endpoints/{embed['id']}")).status_code == 409
    r = await api.patch(f"/api/v1/probes/{probe['id']}",
                        json={"workload": {"max_tokens": 8}, "rag_endpoints": None})
    assert r.status_code == 200, r.text
    assert r.json()["rag_endpoints"] is None
    assert (await api.delete(f"/api/v1/endpoints/{embed['id']}")).status_code == 204


CONFIG = """\
version: 1
endpoints:
  - name: gen
    base_url: BASE
    model: m
  - name: emb
    base_url: BASE
    model: m
    api_kind: openai-embeddings
  - name: rr
    base_url: BASE
    model: m
    api_kind: rerank
probes:
  - name: rag
    endpoint: gen
    workload:
      max_tokens: 8
      rag: {corpus: CORPUS, top_k: 3, rerank_top_n: 2}
    rag_endpoints: {embed: emb, rerank: rr}
    schedule: {every: 1h}
    enabled: false
"""


async def test_a_rag_probe_in_the_config_file_refers_to_its_endpoints_by_name(
        api: httpx.AsyncClient, app: FastAPI, simulator: SimulatorHandle,
        datasets: Path) -> None:
    text = CONFIG.replace("BASE", simulator.base_url).replace(
        "CORPUS", str(datasets / "corpus.jsonl"))
    config, located = parse(text, "sustain.yaml", {})
    async with runtime_of(app).sessions.begin() as session:
        await sync(session, config, located, "/etc/sustain.yaml")
    named = {e["name"]: e["id"] for e in (await api.get("/api/v1/endpoints")).json()["items"]}
    [probe] = (await api.get("/api/v1/probes")).json()["items"]
    assert probe["endpoint_id"] == named["gen"]
    assert probe["rag_endpoints"] == {"embed_endpoint_id": named["emb"],
                                      "rerank_endpoint_id": named["rr"]}
    run = await wait_for_run(api, (await api.post(f"/api/v1/probes/{probe['id']}/runs")
                                   ).json()["id"])
    assert run["status"] == "succeeded", run
    assert set(run["summary"]["rag_stages_ms"]) >= {"embed", "retrieve", "rerank"}


@pytest.mark.parametrize(("edit", "problem"), [
    (("    rag_endpoints: {embed: emb, rerank: rr}\n", ""),
     "sustain.yaml:15: probes[0].rag_endpoints: a rag workload needs the probe's "
     "rag_endpoints (at least its embeddings endpoint)"),
    (("{embed: emb, rerank: rr}", "{embed: gone}"),
     "sustain.yaml:20: probes[0].rag_endpoints.embed: no endpoint named 'gone' in this file"),
    (("{embed: emb, rerank: rr}", "{embed: rr}"),
     "sustain.yaml:20: probes[0].rag_endpoints.embed: the rag embeddings endpoint must be of "
     "api_kind openai-embeddings, not rerank"),
    (("endpoint: gen", "endpoint: emb"),
     "sustain.yaml:16: probes[0].endpoint: a rag probe generates with its own endpoint, which "
     "must be of a chat kind (openai-chat, openai-responses or anthropic-messages), not "
     "openai-embeddings"),
])
def test_config_file_rag_endpoints_that_do_not_fit_are_reported_with_their_lines(
        edit: tuple[str, str], problem: str) -> None:
    text = CONFIG.replace("BASE", "http://127.0.0.1:9/v1").replace("CORPUS", "c.jsonl")
    with pytest.raises(ConfigError) as caught:
        parse(text.replace(*edit), "sustain.yaml", {})
    assert caught.value.lines() == [problem]


async def test_a_pgvector_url_reference_is_held_to_the_secret_policy(
        api: httpx.AsyncClient, datasets: Path) -> None:
    chat = await create_endpoint(api, "http://127.0.0.1:9/v1", name="gen")
    embed = await create_endpoint(api, "http://127.0.0.1:9/v1", name="emb",
                                  api_kind="openai-embeddings")
    body = {"name": "rag", "endpoint_id": chat["id"], "interval_s": 60,
            "rag_endpoints": {"embed_endpoint_id": embed["id"]}}
    refused = await api.post("/api/v1/probes", json=body | {"workload": rag_workload(
        datasets, pgvector_dsn_ref="env:PG_URL")})
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["field"] == "workload.rag.pgvector_dsn_ref"
    allowed = await api.post("/api/v1/probes", json=body | {"workload": rag_workload(
        datasets, pgvector_dsn_ref="env:TEST_PG_URL")})
    assert allowed.status_code == 201, allowed.text
    r = await api.patch(f"/api/v1/probes/{allowed.json()['id']}", json={
        "workload": rag_workload(datasets, pgvector_dsn_ref="env:SUSTAIN_DATABASE_URL")})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == "workload.rag.pgvector_dsn_ref"
