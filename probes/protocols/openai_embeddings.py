"""The OpenAI embeddings protocol (`POST /v1/embeddings`), as OpenAI, vLLM, TEI, llama.cpp
and Infinity speak it: `input` is a list of texts, the answer one vector per input
(`data[{index, embedding}]`) and `usage.prompt_tokens`. Never streamed: the request is timed
end to end.

A vector is checked as cheaply as the loop that times other requests allows: its length (all
alike, and the workload's `dimensions` when it names one) and that its values are finite
numbers (one C-level sum per vector: a NaN, an infinity or a value that is not a number makes
it non-finite or raises; values so large their sum overflows are refused as implausible).
Base64 vectors (`encoding_format: base64`, little-endian float32) are
checked the same way after decoding. No vector may be longer than MAX_DIMENSIONS, and the whole
answer was read up to WHOLE_BODY_LIMIT (16 MiB, streaming.py), so what one answer can
make the probe hold is bounded. An answer that misses any check is `protocol`; one with no
vectors at all is `empty`. A kept answer (a RAG pipeline's) is one float32 matrix: 4 bytes a
value, not a Python float's 32."""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import NS_PER_MS, ErrorClass, Measurement
from sustain.probes.protocols.base import ApiProtocol, ItemSizes, RagStage, RequestForm
from sustain.probes.protocols.streaming import failure, json_object
from sustain.probes.protocols.usage_counts import token_count

MAX_DIMENSIONS = 16_384
"""Longest embedding vector taken (the largest models' are 4,096 to 12,288 long); a longer one
is `protocol`, so an endpoint cannot make a pipeline hold vectors of any length."""


def vector_length(embedding: Any) -> int | str:
    """The length of one vector, or why it is not a vector of finite numbers."""
    if isinstance(embedding, str):
        try:
            raw = base64.b64decode(embedding, validate=True)
        except (binascii.Error, ValueError):
            return "embedding is neither a list of numbers nor base64"
        if len(raw) % 4:
            return "base64 embedding is not float32"
        if len(raw) // 4 > MAX_DIMENSIONS:
            return f"embedding of {len(raw) // 4} dimensions, more than {MAX_DIMENSIONS}"
        values = np.frombuffer(raw, dtype="<f4")
        return int(values.size) if bool(np.isfinite(values).all()) else \
            "embedding has a non-finite value"
    if not isinstance(embedding, list):
        return "embedding is not a list"
    if len(embedding) > MAX_DIMENSIONS:
        return f"embedding of {len(embedding)} dimensions, more than {MAX_DIMENSIONS}"
    try:
        total = sum(embedding, 0.0)  # C speed; a string or an object raises
    except TypeError:
        return "embedding has a value that is not a number"
    if not math.isfinite(total):
        return "embedding has a non-finite value"
    return len(embedding)


def vectors_problem(data: list[Any], expect: ExpectedItems | None) -> str | None:
    """Why `data` is not one finite vector per input, all of one length, or None."""
    if expect is not None and len(data) != expect.count:
        return f"{len(data)} embeddings for {expect.count} inputs"
    lengths: set[int] = set()
    indices: set[int] = set()
    for item in data:
        if not isinstance(item, dict):
            return "embedding item is not an object"
        length = vector_length(item.get("embedding"))
        if isinstance(length, str):
            return length
        lengths.add(length)
        index = item.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            indices.add(index)
    if len(lengths) != 1 or 0 in lengths:
        return "embeddings of different (or no) lengths"
    if indices and indices != set(range(len(data))):
        return "embedding indices are not one per input"
    (length,) = lengths
    if expect is not None and expect.dimensions is not None and length != expect.dimensions:
        return f"embeddings of {length} dimensions, not {expect.dimensions}"
    return None


def vector_matrix(embeddings: list[Any]) -> npt.NDArray[np.float32]:
    """Checked vectors (lists, or base64 float32), all of one length, as the rows of one
    float32 matrix."""
    matrix = np.empty((len(embeddings), vector_dimensions(embeddings[0])), dtype=np.float32)
    for row, embedding in enumerate(embeddings):
        matrix[row] = np.frombuffer(base64.b64decode(embedding), "<f4") \
            if isinstance(embedding, str) else embedding
    return matrix


def vector_dimensions(embedding: Any) -> int:
    """A checked vector's length."""
    return len(base64.b64decode(embedding)) // 4 if isinstance(embedding, str) \
        else len(embedding)


def whole_response(raw: bytes, t_send_ns: int, end: int, status: int,
                   keep_reply: bool = False, expect: ExpectedItems | None = None
                   ) -> Measurement:
    """Measure an embeddings answer that ended at `end` (ns); with `keep_reply`, keep its
    vectors in input order (a pipeline's next stage reads them)."""
    payload = json_object(raw)
    if isinstance(payload, str):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, payload)
    data = payload.get("data")
    if not isinstance(data, list):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, "data is not a list")
    usage = payload.get("usage")
    prompt = token_count(usage.get("prompt_tokens")) if isinstance(usage, dict) else None
    problem = "no embeddings" if not data else vectors_problem(data, expect)
    error = None if problem is None else \
        ErrorClass.EMPTY if not data else ErrorClass.PROTOCOL
    vectors = None
    if keep_reply and error is None:
        ordered = sorted(data, key=lambda item: item.get("index", 0)
                         if isinstance(item.get("index"), int) else 0)
        vectors = vector_matrix([item["embedding"] for item in ordered])
        if not bool(np.isfinite(vectors).all()):  # finite as float64, beyond float32's range
            vectors, error, problem = None, ErrorClass.PROTOCOL, "embedding beyond float32"
    return Measurement(
        ttft_ms=None, itl_ms=(), e2e_ms=(end - t_send_ns) / NS_PER_MS, output_tokens=0,
        tokens_server_counted=True, input_tokens=prompt, http_status=status,
        error_class=error, error_detail=problem, items=len(data) if error is None else None,
        vectors=vectors)


class OpenAIEmbeddings(ApiProtocol):
    kind: ClassVar[ApiKind] = ApiKind.OPENAI_EMBEDDINGS
    path: ClassVar[str] = "/embeddings"
    otel_operation: ClassVar[str | None] = "embeddings"
    otel_provider: ClassVar[str | None] = "openai"
    form: ClassVar[RequestForm] = "items"
    first_token: ClassVar[bool] = False
    rag_stage: ClassVar[RagStage | None] = "embed"
    workload_fields: ClassVar[frozenset[str]] = frozenset({"batch_size", "dimensions"})
    figures: ClassVar[tuple[str, ...]] = ("input_tokens", "items", "vectors")

    def whole(self, raw: bytes, t_send_ns: int, end: int, status: int,
              keep_reply: bool = False, expect: ExpectedItems | None = None) -> Measurement:
        return whole_response(raw, t_send_ns, end, status, keep_reply, expect)

    def item_body(self, body: dict[str, Any], model: str, sizes: ItemSizes,
                  texts: Callable[[int], list[str]], _query: Callable[[], str]) -> None:
        """`batch_size` inputs (floats unless extra_body asks for base64)."""
        body.setdefault("encoding_format", "float")
        body.update(model=model, input=texts(sizes.batch_size))

    def expected_items(self, body: Mapping[str, Any], sizes: ItemSizes) -> ExpectedItems:
        """One vector per input, of the workload's `dimensions` when it names them."""
        return ExpectedItems(len(body["input"]), sizes.dimensions)


OPENAI_EMBEDDINGS = OpenAIEmbeddings()
