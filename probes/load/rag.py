"""A RAG probe's requests: one user question as the pipeline serves it, stage by stage, against
real endpoints: embed the question (an openai-embeddings endpoint), retrieve the top_k passages
from the corpus's index, optionally rerank them (a rerank endpoint), then generate with
them in the prompt (the probe's own endpoint, a chat kind, streamed as the workload says).

The corpus is embedded once per run, through the same embeddings endpoint, before any request is
measured (`index`), and kept in memory (one float32 matrix, written batch by batch as the answers
come: each answer holds exactly one vector per passage it was sent, of at most 16,384 values and
the length of every other, and the whole matrix at most the policy's `rag_max_index_bytes`,
SUSTAIN_RAG_MAX_INDEX_BYTES: beyond it the run fails before the matrix is made), or in the
operator's PostgreSQL with pgvector (`rag.pgvector_dsn_ref`; probes/client/pgvector.py), where each
retrieval is then a query: its round trip is the `retrieve` stage, and `close()` drops the run's
table. Each request is timed from its question's t_send: its TTFT is the time to the generation's
first token, its E2E the time to the generation's end; each stage keeps its own time (`stages_ms`):
`embed` and `rerank` from their request's t_send until the pipeline holds their answer (the
request's E2E and the reading of its body: what the next stage waits for), `retrieve` the index's
search, `generate_ttft` and `generate` the generation's TTFT and E2E from its own t_send. What the
stages do not cover is the pipeline's own work between them (choosing the passages, building the
next request): `e2e - (embed + retrieve + rerank + generate)`. A stage that fails fails the request
with its error class, its detail naming the stage.

Every text a stage sends starts with the request's salt (unless the cache is allowed), so no
stage is served from another request's cache.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.pgvector import PgVectorError, PgVectorIndex
from sustain.probes.client.target import Target
from sustain.probes.measure.expect import Expect
from sustain.probes.measure.quality import meets
from sustain.probes.measure.sample import NS_PER_MS, ErrorClass, Measurement
from sustain.probes.protocols.registry import is_conversation, rag_stage_of
from sustain.probes.protocols.streaming import encode_request
from sustain.probes.workload.corpus import Passage, RagSpec, VectorIndex, load_corpus
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.requests import RequestBuilder, joined
from sustain.probes.workload.sessions import Dialogue
from sustain.probes.workload.spec import Workload, WorkloadError

Transport = Callable[..., Awaitable[Measurement]]
"""transport(target, encoded, stream, t_send_ns, keep_reply=..., expect=...)."""
SendFn = Callable[[int], Awaitable[Measurement]]
SYSTEM_PROMPT = "Answer the question from the passages below. Say which passage you used."


@dataclass(frozen=True, slots=True)
class PgVectorStore:
    """A pgvector store to keep the index in: its URL (resolved from the workload's secret
    reference) and the egress policy its host must pass."""

    dsn: str = field(repr=False)
    egress: EgressPolicy


class RagIndexError(WorkloadError):
    """The corpus could not be embedded: the run fails with this message, nothing measured."""


def rag_problem(target: Target, workload: Workload) -> str | None:
    """Why this target and workload cannot run as a RAG probe, or None."""
    if workload.rag is None:
        return None
    if target.rag is None:
        return "a rag workload needs the probe's embeddings endpoint"
    if not is_conversation(target.api_kind):
        return "a rag probe generates with a chat endpoint (openai-chat, openai-responses or " \
            "anthropic-messages)"
    if rag_stage_of(target.rag.embed.api_kind) != "embed":
        return "the rag embeddings endpoint must be of api_kind openai-embeddings"
    if target.rag.rerank is not None and rag_stage_of(target.rag.rerank.api_kind) != "rerank":
        return "the rag rerank endpoint must be of api_kind rerank"
    if workload.in_sessions:
        return "a rag probe asks single questions: no sessions"
    return None


class RagPipeline:
    """The `prepare` of a RAG probe: `index()` first (before the run), then `prepare(seq)`
    builds question `seq`'s pipeline."""

    def __init__(self, transport: Transport, target: Target, workload: Workload,
                 headers_of: Callable[[Target], Mapping[str, str]],
                 datasets: DatasetPolicy, pgvector: PgVectorStore | None = None) -> None:
        problem = rag_problem(target, workload)
        if problem is not None:
            raise WorkloadError(problem)
        assert workload.rag is not None
        assert target.rag is not None
        self.spec: RagSpec = workload.rag
        self.transport = transport
        self.target = target
        self.embed = target.rag.embed
        self.rerank = target.rag.rerank
        self.headers = {t.base_url + t.api_kind: dict(headers_of(t))
                        for t in (target, self.embed, *(() if self.rerank is None
                                                        else (self.rerank,)))}
        self.workload = workload
        self.builder = RequestBuilder(workload, target.api_kind, target.model, datasets)
        self.passages: list[Passage] = load_corpus(self.spec.corpus, datasets)
        self.ids = {passage.id: k for k, passage in enumerate(self.passages)}
        self.vectors: VectorIndex | None = None
        self.pgvector = pgvector
        """Where the index is kept when not in memory (the resolved URL and egress policy)."""
        self.store: PgVectorIndex | None = None
        self.dimensions = 0
        """The corpus vectors' length (known once indexed)."""
        self.max_index_bytes = datasets.rag_max_index_bytes
        """Bytes the corpus's vectors may take as float32 (SUSTAIN_RAG_MAX_INDEX_BYTES)."""

    def _headers(self, target: Target) -> dict[str, str]:
        return self.headers[target.base_url + target.api_kind]

    async def index(self) -> None:
        """Embed the corpus, `embed_batch` passages a request, a few at a time, into one
        float32 matrix made when the first answer tells the vectors' length; RagIndexError
        when a batch fails (its error class and detail, never an answer's text), when an
        answer holds another count or length of vectors, or when the matrix would be larger
        than `max_index_bytes`. A failure cancels the batches still in flight."""
        size = self.spec.embed_batch
        limit = asyncio.Semaphore(4)
        matrix: npt.NDArray[np.float32] | None = None

        async def embed(start: int) -> None:
            nonlocal matrix
            batch = self.passages[start:start + size]
            encoded = encode_request({"model": self.embed.model, "encoding_format": "float",
                                      "input": [p.text for p in batch]},
                                     self._headers(self.embed))
            async with limit:
                m = await self.transport(self.embed, encoded, False, time.perf_counter_ns(),
                                         keep_reply=True, expect=ExpectedItems(len(batch)))
            vectors = m.vectors
            if m.error_class is not None or vectors is None:
                raise RagIndexError(f"the rag corpus could not be embedded: {m.error_class} "
                                    f"({m.error_detail or 'no vectors'})")
            if vectors.shape[0] != len(batch):  # the protocol checked it; never trust a size
                raise RagIndexError(f"the rag corpus could not be embedded: {vectors.shape[0]} "
                                    f"vectors for {len(batch)} passages")
            if matrix is None:
                matrix = self._matrix(vectors.shape[1])
            elif vectors.shape[1] != matrix.shape[1]:
                raise RagIndexError("the rag corpus could not be indexed: its embeddings are "
                                    f"of different lengths ({matrix.shape[1]} and "
                                    f"{vectors.shape[1]})")
            matrix[start:start + len(batch)] = vectors

        tasks = [asyncio.ensure_future(embed(k)) for k in range(0, len(self.passages), size)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        assert matrix is not None
        self.dimensions = matrix.shape[1]
        if self.pgvector is None:
            try:
                self.vectors = VectorIndex(matrix)
            except ValueError as exc:
                raise RagIndexError(f"the rag corpus could not be indexed: {exc}") from None
            return
        try:
            self.store = await PgVectorIndex.create(self.pgvector.dsn, self.pgvector.egress,
                                                    matrix, self.spec.top_k)
        except PgVectorError as exc:
            raise RagIndexError(f"the rag corpus could not be indexed: {exc}") from None

    def _matrix(self, dimensions: int) -> npt.NDArray[np.float32]:
        """The index's matrix for the corpus at `dimensions` values a vector; RagIndexError,
        naming SUSTAIN_RAG_MAX_INDEX_BYTES, when it would take more than max_index_bytes."""
        need = index_bytes(len(self.passages), dimensions)
        if need > self.max_index_bytes:
            raise RagIndexError(
                f"the rag corpus could not be indexed: {len(self.passages)} passages of "
                f"{dimensions} dimensions take {need:,} bytes, more than the "
                f"{self.max_index_bytes:,} of SUSTAIN_RAG_MAX_INDEX_BYTES")
        return np.empty((len(self.passages), dimensions), dtype=np.float32)

    async def close(self) -> None:
        """Drop a pgvector store's table (nothing to do for the in-memory index)."""
        if self.store is not None:
            store, self.store = self.store, None
            await store.close()

    async def retrieve(self, query: npt.NDArray[np.float32] | Sequence[float]) -> list[int]:
        """The top_k passages for a question's vector: from the pgvector store, else the
        in-memory index (ValueError for a vector of another length; PgVectorError)."""
        if self.store is not None:
            if len(query) != self.dimensions:
                raise ValueError(f"a query of {len(query)} dimensions against passages of "
                                 f"{self.dimensions}")
            return await self.store.top_k(query, self.spec.top_k)
        assert self.vectors is not None
        return self.vectors.top_k(query, self.spec.top_k)

    @property
    def indexed(self) -> bool:
        """Whether `index()` has built the corpus's index (in memory or in the store)."""
        return self.vectors is not None or self.store is not None

    def question(self, seq: int) -> tuple[str, str | None, Expect | None]:
        """Question `seq` (behind its salt), the id of the passage it expects, and its
        canary: the dataset's line, or words drawn from a passage of the corpus."""
        salt = self.builder.salt()
        if self.builder.dataset is not None:
            order = self.builder.order
            entry = self.builder.dataset[order[seq % len(order)]]
            return joined(salt, entry.text()), entry.passage, entry.expect
        rng = random.Random(self.workload.seed * 1_000_003 + seq)
        passage = self.passages[rng.randrange(len(self.passages))]
        words = passage.text.split()
        start = rng.randrange(max(1, len(words) - self.spec.question_tokens + 1))
        text = " ".join(words[start:start + self.spec.question_tokens])
        return joined(salt, text), passage.id, None

    def prompt(self, question: str, chosen: list[int], seq: int) -> dict[str, Any]:
        """The generation request: the passages, then the question."""
        context = "\n\n".join(f"[{self.passages[k].id}] {self.passages[k].text}"
                              for k in chosen)
        body = dict(self.workload.extra_body)
        body["messages"] = [{"role": "system", "content": SYSTEM_PROMPT},
                            {"role": "user",
                             "content": f"{question}\n\nPassages:\n{context}"}]
        return self.builder.finish(body, self.workload.max_tokens, seq)

    def __call__(self, seq: int, _dialogue: Dialogue | None = None) -> SendFn:
        question, expected, expect = self.question(seq)
        embed_request = encode_request({"model": self.embed.model, "encoding_format": "float",
                                        "input": [question]}, self._headers(self.embed))

        async def request(t_send_ns: int) -> Measurement:
            stages: list[tuple[str, float]] = []
            m = await self.transport(self.embed, embed_request, False, t_send_ns,
                                     keep_reply=True, expect=ExpectedItems(1))
            stages.append(("embed", since(t_send_ns)))
            if m.error_class is not None or m.vectors is None or not len(m.vectors) \
                    or not self.indexed:
                return failed("embed", m, t_send_ns, stages)
            started = time.perf_counter_ns()
            try:
                chosen = await self.retrieve(m.vectors[0])
            except ValueError as exc:  # the question's vector is not the corpus's length
                return failed("retrieve", replace(m, error_detail=str(exc)), t_send_ns, stages,
                              protocol=True)
            except PgVectorError as exc:
                stages.append(("retrieve", since(started)))
                return failed("retrieve", replace(m, error_class=exc.error_class,
                                                  error_detail=str(exc), http_status=None),
                              t_send_ns, stages)
            stages.append(("retrieve", since(started)))
            if self.rerank is not None:
                top_n = self.spec.rerank_top_n or len(chosen)
                encoded = encode_request(
                    {"model": self.rerank.model, "query": question, "top_n": top_n,
                     "documents": [self.passages[k].text for k in chosen]},
                    self._headers(self.rerank))
                rerank_ns = time.perf_counter_ns()
                m = await self.transport(self.rerank, encoded, False, rerank_ns,
                                         keep_reply=True, expect=ExpectedItems(len(chosen)))
                stages.append(("rerank", since(rerank_ns)))
                if m.error_class is not None or m.ranking is None:
                    return failed("rerank", m, t_send_ns, stages)
                chosen = [chosen[i] for i in m.ranking][:top_n]
            hit = None if expected is None else expected in {self.passages[k].id
                                                             for k in chosen}
            encoded = encode_request(self.prompt(question, chosen, seq),
                                     self._headers(self.target))
            generate_ns = time.perf_counter_ns()
            m = await self.transport(self.target, encoded, self.workload.stream, generate_ns,
                                     keep_reply=expect is not None)
            if m.ttft_ms is not None:
                stages.append(("generate_ttft", m.ttft_ms))
            stages.append(("generate", m.e2e_ms))
            offset = (generate_ns - t_send_ns) / NS_PER_MS
            quality = None if expect is None or m.error_class is not None or m.reply is None \
                else meets(expect, m.reply, m.output_tokens)
            return replace(
                m, ttft_ms=None if m.ttft_ms is None else offset + m.ttft_ms,
                e2e_ms=offset + m.e2e_ms,
                tool_call_ms=None if m.tool_call_ms is None else offset + m.tool_call_ms,
                stages_ms=tuple(stages), hit=hit, reply=None, quality=quality,
                error_detail=None if m.error_detail is None else f"generate: {m.error_detail}")
        return request


def index_bytes(passages: int, dimensions: int) -> int:
    """Bytes a corpus's vectors take in the index: float32, 4 bytes a value."""
    return passages * dimensions * 4


def since(start_ns: int) -> float:
    """ms from `start_ns` (perf_counter_ns) to now."""
    return (time.perf_counter_ns() - start_ns) / NS_PER_MS


def failed(stage: str, m: Measurement, t_send_ns: int, stages: list[tuple[str, float]], *,
           protocol: bool = False) -> Measurement:
    """The request, failed at `stage`: its error class (protocol for a retrieval that could
    not run), timed from the question's t_send to now."""
    return Measurement(
        ttft_ms=None, itl_ms=(), e2e_ms=(time.perf_counter_ns() - t_send_ns) / NS_PER_MS,
        output_tokens=0, tokens_server_counted=False, input_tokens=None,
        http_status=m.http_status,
        error_class=ErrorClass.PROTOCOL if protocol or m.error_class is None else m.error_class,
        error_detail=f"{stage}: {m.error_detail or 'no answer to read'}",
        stages_ms=tuple(stages))
