"""A RAG probe's corpus and its in-memory vector index (pure but for reading the file).

The corpus is a JSONL file of `{"id": ..., "text": ...}` passages, read as datasets are (under
SUSTAIN_DATASET_DIR, within SUSTAIN_DATASET_MAX_BYTES). Each run embeds it once, with the probe's
embeddings endpoint, before any request is measured; the index keeps the vectors as one
normalised float32 matrix, so a question's retrieval is one matrix-vector product and a
partial sort: 10,000 passages of 1,024 dimensions take about a millisecond, and that time is
the request's `retrieve` stage, measured as such. Where the operator points at PostgreSQL with
pgvector (`pgvector_dsn_ref`), the vectors go there instead (probes/client/pgvector.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pydantic import Field

from sustain.probes.inputs import InputModel
from sustain.probes.workload.dataset import DatasetError, DatasetPolicy

MAX_PASSAGES = 100_000
MAX_PASSAGE_CHARS = 20_000


class RagSpec(InputModel):
    """What a RAG probe retrieves from and how much of it reaches the model."""

    corpus: str = Field(min_length=1, max_length=4096,
                        description='Path of a JSONL corpus of {"id", "text"} passages.')
    top_k: int = Field(default=4, ge=1, le=100,
                       description="Passages retrieved by vector similarity.")
    rerank_top_n: int | None = Field(
        default=None, ge=1, le=100,
        description="With a rerank endpoint: the passages kept after reranking (default: all "
        "top_k, reordered).")
    question_tokens: int = Field(
        default=12, ge=1, le=1000,
        description="Without a dataset: each synthetic question is this many words of one "
        "passage (its expected passage, for the hit rate).")
    embed_batch: int = Field(default=32, ge=1, le=2048,
                             description="Passages per embeddings request when indexing.")
    pgvector_dsn_ref: str | None = Field(
        default=None, pattern=r"^(env:[A-Za-z_][A-Za-z0-9_]*|file:/.+)$", max_length=4096,
        description="Keep the index in PostgreSQL with pgvector instead of in memory: a secret "
        "reference (env:NAME or file:/path) to its postgresql:// URL. Each run stores its "
        "corpus vectors in a table of its own there (dropped when the run ends) and each "
        "question's retrieval is a query to it.")


@dataclass(frozen=True, slots=True)
class Passage:
    id: str
    text: str


def load_corpus(path: str, policy: DatasetPolicy) -> list[Passage]:
    """The corpus at `path`; DatasetError for a file the policy refuses or a bad line."""
    passages: list[Passage] = []
    seen: set[str] = set()
    for number, line in enumerate(policy.lines(path), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except ValueError:
            raise DatasetError(f"{where}: not JSON") from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str) \
                or not record["text"].strip():
            raise DatasetError(f"{where}: needs a non-empty 'text'")
        ident = record.get("id", str(number))
        if not isinstance(ident, str | int) or isinstance(ident, bool):
            raise DatasetError(f"{where}: 'id' must be a string")
        ident = str(ident)
        if ident in seen:
            raise DatasetError(f"{where}: id {ident!r} appears twice")
        seen.add(ident)
        passages.append(Passage(ident, record["text"][:MAX_PASSAGE_CHARS]))
        if len(passages) > MAX_PASSAGES:
            raise DatasetError(f"{path}: more than {MAX_PASSAGES} passages")
    if not passages:
        raise DatasetError(f"{path}: no passages")
    return passages


class VectorIndex:
    """The corpus's vectors, normalised, for cosine top-k."""

    def __init__(self, vectors: npt.NDArray[np.float32] | Sequence[Sequence[float]]) -> None:
        """`vectors` as one float32 matrix; a float32 matrix given is taken as it is and
        normalised in place (no second copy of an index that may be large)."""
        matrix = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix /= np.where(norms == 0, 1, norms)
        self.matrix = matrix

    def top_k(self, query: npt.NDArray[np.float32] | Sequence[float], k: int) -> list[int]:
        """The indices of the `k` passages most similar to `query`, best first."""
        q = np.asarray(query, dtype=np.float32)
        if q.shape != (self.matrix.shape[1],):
            raise ValueError(f"a query of {q.size} dimensions against passages of "
                             f"{self.matrix.shape[1]}")
        scores = self.matrix @ (q / (np.linalg.norm(q) or 1.0))
        k = min(k, len(scores))
        best = np.argpartition(-scores, k - 1)[:k]
        return [int(i) for i in best[np.argsort(-scores[best])]]
