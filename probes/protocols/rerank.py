"""The rerank protocol (`POST /v1/rerank`) that vLLM, Jina, Cohere and llama.cpp share: a
`query` and `documents` in, `results[{index, relevance_score}]` out (best first), usage as
`usage.total_tokens` (vLLM, Jina) or Cohere's `meta.tokens.input_tokens`. TEI's own `/rerank`
answers a bare list of `{index, score}`, read the same way. Never streamed: the request is
timed end to end.

An answer must score each document at most once, by an index among those sent, with a finite
number; at most as many results as documents (fewer when `top_n` asks). A miss is `protocol`;
no results at all is `empty`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import orjson

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import NS_PER_MS, ErrorClass, Measurement
from sustain.probes.protocols.base import ApiProtocol, ItemSizes, RagStage, RequestForm
from sustain.probes.protocols.streaming import failure
from sustain.probes.protocols.usage_counts import token_count


def results_problem(results: list[Any], expect: ExpectedItems | None) -> str | None:
    """Why `results` is not a ranking of the documents sent, or None."""
    seen: set[int] = set()
    limit = None if expect is None else expect.count
    for result in results:
        if not isinstance(result, dict):
            return "result is not an object"
        index = result.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0 \
                or (limit is not None and index >= limit):
            return "result index is not one of the documents sent"
        if index in seen:
            return "a document is ranked twice"
        seen.add(index)
        score = result.get("relevance_score", result.get("score"))
        if isinstance(score, bool) or not isinstance(score, (int, float)) \
                or not math.isfinite(score):
            return "relevance score is not a finite number"
    return None


def input_tokens(payload: dict[str, Any]) -> int | None:
    """Tokens the server read: `usage.prompt_tokens` or `usage.total_tokens` (vLLM, Jina),
    else Cohere's `meta.tokens.input_tokens` (as LiteLLM answers too)."""
    usage = payload.get("usage")
    if isinstance(usage, dict):
        counted = token_count(usage.get("prompt_tokens"))
        return counted if counted is not None else token_count(usage.get("total_tokens"))
    meta = payload.get("meta")
    tokens = meta.get("tokens") if isinstance(meta, dict) else None
    return token_count(tokens.get("input_tokens")) if isinstance(tokens, dict) else None


def whole_response(raw: bytes, t_send_ns: int, end: int, status: int,
                   keep_reply: bool = False, expect: ExpectedItems | None = None
                   ) -> Measurement:
    """Measure a rerank answer that ended at `end` (ns): its items are the documents sent;
    with `keep_reply`, keep its ranking (document indices, best first)."""
    try:
        payload = orjson.loads(raw)
    except (ValueError, RecursionError):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, "malformed JSON response")
    if isinstance(payload, list):
        results: Any = payload
        payload = {}
    elif isinstance(payload, dict):
        results = payload.get("results")
    else:
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, "response is not JSON")
    if not isinstance(results, list):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, "results is not a list")
    problem = "no results" if not results else results_problem(results, expect)
    error = None if problem is None else ErrorClass.EMPTY if not results else ErrorClass.PROTOCOL
    items = len(results) if expect is None else expect.count
    ranking = None
    if keep_reply and error is None:
        ranked = sorted(results, key=lambda r: -float(r.get("relevance_score", r.get("score"))))
        ranking = tuple(int(r["index"]) for r in ranked)
    return Measurement(
        ttft_ms=None, itl_ms=(), e2e_ms=(end - t_send_ns) / NS_PER_MS, output_tokens=0,
        tokens_server_counted=True, input_tokens=input_tokens(payload), http_status=status,
        error_class=error, error_detail=problem, items=items if error is None else None,
        ranking=ranking)


class Rerank(ApiProtocol):
    kind: ClassVar[ApiKind] = ApiKind.RERANK
    path: ClassVar[str] = "/rerank"
    otel_operation: ClassVar[str | None] = "rerank"
    otel_provider: ClassVar[str | None] = "cohere"
    form: ClassVar[RequestForm] = "items"
    first_token: ClassVar[bool] = False
    rag_stage: ClassVar[RagStage | None] = "rerank"
    workload_fields: ClassVar[frozenset[str]] = frozenset({"documents", "query_tokens"})
    figures: ClassVar[tuple[str, ...]] = ("input_tokens", "items", "ranking")

    def whole(self, raw: bytes, t_send_ns: int, end: int, status: int,
              keep_reply: bool = False, expect: ExpectedItems | None = None) -> Measurement:
        return whole_response(raw, t_send_ns, end, status, keep_reply, expect)

    def item_body(self, body: dict[str, Any], model: str, sizes: ItemSizes,
                  texts: Callable[[int], list[str]], query: Callable[[], str]) -> None:
        """A query (`query_tokens` long) and `documents` documents to rank."""
        body.update(model=model, query=query(), documents=texts(sizes.documents))

    def expected_items(self, body: Mapping[str, Any], _sizes: ItemSizes) -> ExpectedItems:
        """At most one score per document sent."""
        return ExpectedItems(len(body["documents"]))


RERANK = Rerank()
