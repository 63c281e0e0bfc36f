"""A RAG probe's index against a hostile embeddings endpoint on loopback: an answer with
more vectors than the passages it was sent, vectors beyond 16,384 dimensions, batches of
different lengths, a body beyond the 16 MiB a whole answer may be, and vectors that would make
the index larger than SUSTAIN_RAG_MAX_INDEX_BYTES each fail the run (naming the limit) before
anything is measured; within the bound the index is one float32 matrix (4 bytes a value),
never Python floats."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import psutil
import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, RagEndpoints, Target
from sustain.probes.load.profiles import ConcurrencyProfile
from sustain.probes.load.rag import RagIndexError, RagPipeline
from sustain.probes.load.senders import any_transport
from sustain.probes.runner import execute
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload

MiB = 1024 * 1024
Answer = Callable[[int, int], bytes]
"""answer(batch number, inputs) -> the JSON body of an embeddings answer."""


def vectors(count: int, dimensions: int) -> bytes:
    item = b'{"embedding":[' + b",".join([b"0.5"] * dimensions) + b"]}"
    return b'{"data":[' + b",".join([item] * count) + b'],"usage":{"prompt_tokens":1}}'


class Hostile:
    """An embeddings endpoint on a loopback port that answers what `answer` says."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.batches = 0
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                inputs = len(json.loads(await reader.readexactly(length))["input"])
                body = self.answer(self.batches, inputs)
                self.batches += 1
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n\r\n" % len(body))
                writer.write(body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"


@pytest.fixture
async def hostile() -> AsyncIterator[Callable[[Answer], Hostile]]:
    made: list[Hostile] = []

    def make(answer: Answer) -> Hostile:
        server = Hostile(answer)
        made.append(server)
        return server
    yield make
    for server in made:
        if server.server is not None:
            server.server.close()


async def started(server: Hostile) -> Hostile:
    server.server = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    return server


def corpus(tmp_path: Path, passages: int) -> str:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{k}", "text": f"passage {k}"}) + "\n"
                            for k in range(passages)))
    return str(path)


def rag_target(url: str) -> Target:
    return Target(base_url="http://127.0.0.1:9/v1", api_kind=ApiKind.OPENAI_CHAT, model="m",
                  rag=RagEndpoints(embed=Target(base_url=url,
                                                api_kind=ApiKind.OPENAI_EMBEDDINGS, model="e")))


async def run(server: Hostile, tmp_path: Path, passages: int, batch: int,
              policy: DatasetPolicy | None = None) -> str:
    """The run's failure (RagIndexError's message): it never gets to send a question."""
    await started(server)
    workload = Workload.model_validate({"max_tokens": 4, "rag": {
        "corpus": corpus(tmp_path, passages), "embed_batch": batch}})
    async with HttpClients() as clients:
        with pytest.raises(RagIndexError) as failed:
            await execute(clients, rag_target(server.url), workload,
                          ConcurrencyProfile(users=1, max_requests=1),
                          datasets=policy or DatasetPolicy.unrestricted())
    return str(failed.value)


async def test_more_vectors_than_passages_fail_the_run(
        hostile: Callable[[Answer], Hostile], tmp_path: Path) -> None:
    message = await run(hostile(lambda _, n: vectors(n * 8, 16)), tmp_path, 64, 32)
    assert "256 embeddings for 32 inputs" in message


async def test_vectors_beyond_16384_dimensions_fail_the_run(
        hostile: Callable[[Answer], Hostile], tmp_path: Path) -> None:
    message = await run(hostile(lambda _, n: vectors(n, 16_385)), tmp_path, 4, 4)
    assert "16385 dimensions, more than 16384" in message


async def test_batches_of_different_lengths_fail_the_run(
        hostile: Callable[[Answer], Hostile], tmp_path: Path) -> None:
    message = await run(hostile(lambda k, n: vectors(n, 8 if k == 0 else 16)), tmp_path, 8, 2)
    assert "different lengths" in message


async def test_an_answer_beyond_16_mib_is_not_read_whole(
        hostile: Callable[[Answer], Hostile], tmp_path: Path) -> None:
    huge = vectors(512, 10_000)  # 20 MiB of JSON
    assert len(huge) > 16 * MiB
    message = await run(hostile(lambda _k, _n: huge), tmp_path, 512, 512)
    assert "response body over 16 MiB" in message


async def test_an_index_beyond_its_bytes_fails_naming_the_variable(
        hostile: Callable[[Answer], Hostile], tmp_path: Path) -> None:
    # 512 passages of 4,096 float32 values are 8 MiB: twice the bound
    server = hostile(lambda _, n: vectors(n, 4096))
    message = await run(server, tmp_path, 512, 128,
                        DatasetPolicy(anywhere=True, rag_max_index_bytes=4 * MiB))
    assert "SUSTAIN_RAG_MAX_INDEX_BYTES" in message
    assert "8,388,608 bytes" in message
    assert server.batches <= 4  # the first answer told; the batches in flight were cancelled


async def test_the_index_is_one_float32_matrix_within_its_bound(
        hostile: Callable[[Answer], Hostile], tmp_path: Path) -> None:
    passages, dimensions = 1024, 4096
    answer = vectors(128, dimensions)  # 2 MiB of JSON a batch, 8 batches
    server = await started(hostile(lambda _k, _n: answer))
    workload = Workload.model_validate({"max_tokens": 4, "rag": {
        "corpus": corpus(tmp_path, passages), "embed_batch": 128}})
    async with HttpClients() as clients:
        pipeline = RagPipeline(any_transport(clients), rag_target(server.url), workload,
                               lambda _: {}, DatasetPolicy.unrestricted())
        gc.collect()
        before = psutil.Process().memory_info().rss
        peak = before
        done = asyncio.Event()

        async def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, psutil.Process().memory_info().rss)
                await asyncio.sleep(0)
        sampler = asyncio.create_task(sample())
        await pipeline.index()
        done.set()
        await sampler
    assert server.batches == passages // 128
    assert pipeline.vectors is not None
    matrix = pipeline.vectors.matrix
    assert matrix.dtype.name == "float32"
    assert matrix.nbytes == passages * dimensions * 4  # 16 MiB
    # as tuples of Python floats the same vectors were 128 MiB
    assert peak - before < 96 * MiB, (peak - before) / MiB
