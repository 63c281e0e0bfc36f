"""The simulator's answers of the item kinds, as data (no I/O): embeddings (`POST
/v1/embeddings`, one deterministic unit vector per input: its words hashed into the vector's
dimensions, so texts that share words are near, as a real model's are, and a salted input gets
a vector of its own) and rerank (`POST /v1/rerank`, each document scored by the words it shares
with the query, results best first, `top_n` honoured). Both count one token per word. Near
enough to meaning that a RAG probe's retrieval finds a question's passage."""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np

from sustain.simulator.config import Fault


def _seed(*texts: str) -> int:
    return zlib.crc32("\x1f".join(texts).encode())


def words_of(text: str) -> list[str]:
    """The text's words, lower case, without surrounding punctuation."""
    return [w for w in (word.strip(".,;:!?()[]'\"").lower() for word in text.split()) if w]


def vector(text: str, dimensions: int) -> list[float]:
    """A unit vector of `dimensions`, the same for the same text: each word adds or takes
    one at the dimension its hash names (random, seeded by the text, when it has none)."""
    values = np.zeros(dimensions)
    for word in words_of(text):
        hashed = zlib.crc32(word.encode())
        values[hashed % dimensions] += 1.0 if hashed >> 31 else -1.0
    if not values.any():
        values = np.random.default_rng(_seed(text)).standard_normal(dimensions)
    return [round(float(v), 6) for v in values / np.linalg.norm(values)]


def relevance(query: str, document: str) -> float:
    """The words query and document share, over the geometric mean of their counts."""
    q, d = set(words_of(query)), set(words_of(document))
    return len(q & d) / math.sqrt(len(q) * len(d)) if q and d else 0.0


def texts_of(value: Any) -> list[str] | str:
    """The texts of an `input` or `documents` field (a string or a list of strings), or why
    it is not one."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return "must be a string or a non-empty list of strings"


def embeddings(body: dict[str, Any], model: str, dimensions: int, fault: Fault
               ) -> tuple[dict[str, Any], int, int] | str:
    """(answer, inputs, words) for an embeddings request, or why it is refused."""
    inputs = texts_of(body.get("input"))
    if isinstance(inputs, str):
        return f"input: {inputs}"
    words = sum(len(text.split()) for text in inputs)
    vectors = [vector(text, dimensions) for text in inputs]
    if fault is Fault.BAD_ITEMS:
        vectors[-1] = vectors[-1][:-1]
    data = [] if fault is Fault.EMPTY else [
        {"object": "embedding", "index": k, "embedding": values}
        for k, values in enumerate(vectors)]
    return ({"object": "list", "model": str(body.get("model", model)), "data": data,
             "usage": {"prompt_tokens": words, "total_tokens": words}}, len(inputs), words)


def rerank(body: dict[str, Any], model: str, fault: Fault
           ) -> tuple[dict[str, Any], int, int] | str:
    """(answer, documents, words) for a rerank request, or why it is refused."""
    query = body.get("query")
    if not isinstance(query, str) or not query:
        return "query: must be a non-empty string"
    documents = texts_of(body.get("documents"))
    if isinstance(documents, str):
        return f"documents: {documents}"
    scored = [(round(relevance(query, text), 6), -k) for k, text in enumerate(documents)]
    scored.sort(reverse=True)
    top_n = body.get("top_n")
    if isinstance(top_n, int) and not isinstance(top_n, bool) and top_n > 0:
        scored = scored[:top_n]
    results = [{"index": -k, "relevance_score": score} for score, k in scored]
    if fault is Fault.EMPTY:
        results = []
    elif fault is Fault.BAD_ITEMS:
        results[-1]["index"] = len(documents)
    words = len(query.split()) + sum(len(text.split()) for text in documents)
    return ({"id": f"rerank-{_seed(query):08x}", "model": str(body.get("model", model)),
             "results": results, "usage": {"total_tokens": words}}, len(documents), words)
