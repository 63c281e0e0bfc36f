"""What an answer of the item kinds (embeddings, rerank) must hold, known when the request is
built: how many items were sent, and for embeddings the vector length when the workload names
one. The protocol checks the answer against it; a miss is a `protocol` failure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ExpectedItems:
    count: int
    """Inputs (embeddings) or documents (rerank) the request sent."""
    dimensions: int | None = None
    """Embeddings: the length every vector must have; None: all alike, whatever it is."""
