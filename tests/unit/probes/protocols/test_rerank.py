"""Reading rerank answers in the shape vLLM, Jina and Cohere share (and TEI's bare list): each
document scored at most once, by an index among those sent, with a finite score."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.protocols.rerank import whole_response


def answer(*results: dict[str, Any], usage: dict[str, Any] | None = None) -> bytes:
    return json.dumps({"results": list(results),
                       "usage": usage or {"total_tokens": 40}}).encode()


def test_a_ranking_of_the_documents_counts_every_document_sent() -> None:
    raw = answer({"index": 2, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1})
    m = whole_response(raw, 0, 3_000_000, 200, expect=ExpectedItems(3))
    assert (m.error_class, m.items, m.input_tokens, m.e2e_ms) == (None, 3, 40, 3.0)


def test_cohere_counts_input_tokens_under_meta() -> None:
    raw = json.dumps({"results": [{"index": 0, "relevance_score": 0.5}],
                      "meta": {"billed_units": {"search_units": 1},
                               "tokens": {"input_tokens": 17}}}).encode()
    assert whole_response(raw, 0, 1, 200, expect=ExpectedItems(1)).input_tokens == 17


def test_teis_bare_list_with_score_is_read_too() -> None:
    raw = json.dumps([{"index": 1, "score": 0.7}, {"index": 0, "score": 0.2}]).encode()
    m = whole_response(raw, 0, 1, 200, expect=ExpectedItems(2))
    assert (m.error_class, m.items, m.input_tokens) == (None, 2, None)


@pytest.mark.parametrize(("results", "problem"), [
    (({"index": 3, "relevance_score": 0.5},), "not one of the documents sent"),
    (({"index": -1, "relevance_score": 0.5},), "not one of the documents sent"),
    (({"index": 1, "relevance_score": 0.5}, {"index": 1, "relevance_score": 0.4}),
     "ranked twice"),
    (({"index": 0, "relevance_score": "high"},), "not a finite number"),
    (({"index": 0},), "not a finite number"),
])
def test_a_ranking_that_is_not_of_the_documents_sent_is_a_protocol_failure(
        results: tuple[dict[str, Any], ...], problem: str) -> None:
    m = whole_response(answer(*results), 0, 1, 200, expect=ExpectedItems(3))
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail is not None
    assert problem in m.error_detail


def test_no_results_is_empty_and_no_list_is_protocol() -> None:
    assert whole_response(answer(), 0, 1, 200).error_class is ErrorClass.EMPTY
    assert whole_response(b'{"data": 1}', 0, 1, 200).error_class is ErrorClass.PROTOCOL
    assert whole_response(b'{"results": [', 0, 1, 200).error_class is ErrorClass.PROTOCOL
