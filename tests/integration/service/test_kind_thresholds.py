"""A TTFT or TPOT threshold on an endpoint that answers whole (embeddings, rerank, a plain
HTTP check) would fail every request: creating or changing such a probe is a 422 naming the
threshold, and its latency is judged with e2e_ms."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.service.helpers import create_endpoint, create_probe


@pytest.mark.parametrize("api_kind", ["openai-embeddings", "rerank"])
@pytest.mark.parametrize("threshold", ["ttft_ms", "tpot_ms"])
async def test_a_token_threshold_on_a_whole_answer_kind_is_refused_naming_it(
        api: httpx.AsyncClient, api_kind: str, threshold: str) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1", api_kind=api_kind)
    r = await api.post("/api/v1/probes", json={
        "name": "p", "endpoint_id": endpoint["id"], "interval_s": 60,
        "slo": {threshold: 100}})
    assert r.status_code == 422, r.text
    [error] = r.json()["errors"]
    assert error["field"] == f"slo.{threshold}"
    assert "e2e_ms" in error["message"]
    assert (await api.get("/api/v1/probes")).json()["items"] == []

    probe = await create_probe(api, endpoint["id"], slo={"e2e_ms": 100})
    r = await api.patch(f"/api/v1/probes/{probe['id']}", json={"slo": {threshold: 100}})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == f"slo.{threshold}"


async def test_moving_a_probe_with_a_ttft_threshold_to_an_embeddings_endpoint_is_refused(
        api: httpx.AsyncClient) -> None:
    chat = await create_endpoint(api, "http://127.0.0.1:9/v1", name="chat")
    embed = await create_endpoint(api, "http://127.0.0.1:9/v1", name="emb",
                                  api_kind="openai-embeddings")
    probe = await create_probe(api, chat["id"], slo={"ttft_ms": 100})
    r = await api.patch(f"/api/v1/probes/{probe['id']}", json={"endpoint_id": embed["id"]})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == "slo.ttft_ms"
    r = await api.patch(f"/api/v1/probes/{probe['id']}",
                        json={"endpoint_id": embed["id"], "slo": {"e2e_ms": 100}})
    assert r.status_code == 200, r.text
