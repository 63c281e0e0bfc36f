"""A RAG probe against simulator endpoints over real loopback HTTP: the corpus is embedded once,
each question is embedded, retrieved from the in-memory index, optionally reranked, and answered
with the passages in its prompt. A run reports each stage, the pipeline's TTFT and E2E (from the
question), what the stages left out (overhead, never negative), and the retrieval hit rate.

The simulator's embeddings hash a text's words into its vector, and its reranker scores the
words a document shares with the query: a question drawn from a passage finds it, as with a
real model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, RagEndpoints, Target
from sustain.probes.load.profiles import ConcurrencyProfile
from sustain.probes.load.rag import RagIndexError
from sustain.probes.run_result import RunResult
from sustain.probes.runner import execute
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import FAULT_HEADER, SimulatorConfig
from sustain.simulator.server import BackgroundSimulator

TTFT_MS = 8.0
ITEM_MS = 1.0
PASSAGES = 24
REQUESTS = 10


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundSimulator]:
    config = SimulatorConfig(ttft_ms=TTFT_MS, itl_ms=1.0, item_ms=ITEM_MS, output_tokens=6,
                             embedding_dimensions=256)
    with BackgroundSimulator(config) as server:
        yield server


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """Passages of words of their own (w<k>x<j>), so a question drawn from one is near it."""
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{k}", "text": " ".join(
        f"w{k}x{j}" for j in range(30))}) + "\n" for k in range(PASSAGES)))
    return path


def target(sim: BackgroundSimulator, rerank: bool = False,
           generate_fault: str | None = None, embed_fault: str | None = None) -> Target:
    def at(kind: ApiKind, fault: str | None = None) -> Target:
        return Target(base_url=sim.base_url, api_kind=kind, model="m",
                      headers={FAULT_HEADER: fault} if fault else {})
    return Target(base_url=sim.base_url, api_kind=ApiKind.OPENAI_CHAT, model="m",
                  headers={FAULT_HEADER: generate_fault} if generate_fault else {},
                  rag=RagEndpoints(embed=at(ApiKind.OPENAI_EMBEDDINGS, embed_fault),
                                   rerank=at(ApiKind.RERANK) if rerank else None))


async def run(client: HttpClients, target: Target, rag: dict[str, object],
              **workload: object) -> RunResult:
    return await execute(client, target, Workload.model_validate(
        {"max_tokens": 6, "rag": rag, **workload}), ConcurrencyProfile(
            users=2, max_requests=REQUESTS), datasets=DatasetPolicy.unrestricted())


async def test_each_stage_is_timed_and_questions_find_their_passages(
        client: HttpClients, sim: BackgroundSimulator, corpus: Path) -> None:
    result = await run(client, target(sim), {"corpus": str(corpus), "top_k": 3})
    summary = result.summary
    assert summary.successes == REQUESTS
    assert (summary.retrieval_checked, summary.retrieval_hit_ratio) == (REQUESTS, 1.0)
    assert summary.rag_stages_ms is not None
    assert set(summary.rag_stages_ms) == {"embed", "retrieve", "generate_ttft", "generate",
                                          "overhead"}
    for sample in result.samples:
        m = sample.measurement
        assert m.stages_ms is not None
        stages = dict(m.stages_ms)
        assert stages["embed"] >= TTFT_MS + ITEM_MS  # the simulator's own time, at least
        assert stages["generate_ttft"] >= TTFT_MS
        assert m.ttft_ms is not None
        assert m.ttft_ms >= stages["embed"] + stages["retrieve"] + stages["generate_ttft"]
        spent = stages["embed"] + stages["retrieve"] + stages["generate"]
        assert m.e2e_ms >= spent  # the overhead is what the stages left out: never negative
        assert m.hit is True


async def test_a_reranked_pipeline_times_the_rerank_and_keeps_its_top_n(
        client: HttpClients, sim: BackgroundSimulator, corpus: Path) -> None:
    result = await run(client, target(sim, rerank=True),
                       {"corpus": str(corpus), "top_k": 5, "rerank_top_n": 2})
    summary = result.summary
    assert summary.successes == REQUESTS
    assert summary.retrieval_hit_ratio == 1.0
    assert summary.rag_stages_ms is not None
    rerank = summary.rag_stages_ms["rerank"]
    assert rerank.count == REQUESTS
    assert rerank.min is not None
    assert rerank.min >= TTFT_MS + 5 * ITEM_MS


async def test_a_dataset_names_each_questions_passage_and_misses_count(
        client: HttpClients, sim: BackgroundSimulator, corpus: Path, tmp_path: Path) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        json.dumps({"prompt": " ".join(f"w3x{j}" for j in range(10)), "passage": "p3"}) + "\n"
        + json.dumps({"prompt": " ".join(f"w5x{j}" for j in range(10)), "passage": "p9"})
        + "\n")
    result = await run(client, target(sim), {"corpus": str(corpus), "top_k": 2},
                       dataset=str(questions))
    assert result.summary.retrieval_hit_ratio == 0.5  # the second names a passage it is not
    assert [s.measurement.hit for s in result.samples].count(True) == REQUESTS // 2


async def test_a_failing_stage_fails_the_request_naming_it(
        client: HttpClients, sim: BackgroundSimulator, corpus: Path) -> None:
    result = await run(client, target(sim, generate_fault="http_500"),
                       {"corpus": str(corpus)})
    assert result.summary.errors == {"http_5xx": REQUESTS}
    for sample in result.samples:
        assert sample.measurement.error_detail == "generate: HTTP 500: injected http_500"
        assert sample.measurement.stages_ms is not None


async def test_a_corpus_that_cannot_be_embedded_fails_the_run_before_it_starts(
        client: HttpClients, sim: BackgroundSimulator, corpus: Path) -> None:
    with pytest.raises(RagIndexError, match="could not be embedded: http_5xx"):
        await run(client, target(sim, embed_fault="http_500"), {"corpus": str(corpus)})
