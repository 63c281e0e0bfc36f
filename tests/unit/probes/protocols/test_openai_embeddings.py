"""Reading embeddings answers: one finite vector per input, all of one length (the workload's
when it names one), usage read; anything else is a protocol failure."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.protocols.openai_embeddings import vector_length, whole_response


def answer(*vectors: Any, usage: dict[str, Any] | None = None) -> bytes:
    return json.dumps({"object": "list", "data": [
        {"object": "embedding", "index": k, "embedding": v} for k, v in enumerate(vectors)],
        "usage": usage or {"prompt_tokens": 12, "total_tokens": 12}}).encode()


def test_an_answer_with_one_vector_per_input_succeeds_with_its_items_and_tokens() -> None:
    m = whole_response(answer([0.1, 0.2, 0.3], [0.0, -1.0, 2.5]), 0, 4_000_000, 200,
                       expect=ExpectedItems(2, 3))
    assert (m.error_class, m.items, m.input_tokens, m.e2e_ms) == (None, 2, 12, 4.0)
    assert (m.ttft_ms, m.itl_ms, m.output_tokens) == (None, (), 0)


@pytest.mark.parametrize(("vectors", "expect", "problem"), [
    (([0.1, 0.2], [0.3]), ExpectedItems(2), "different"),
    (([0.1, 0.2],), ExpectedItems(2), "1 embeddings for 2 inputs"),
    (([0.1, 0.2], [0.3, 0.4]), ExpectedItems(2, 3), "2 dimensions, not 3"),
    (([0.1, "x"],), ExpectedItems(1), "not a number"),
    (([0.1, 1e308, 1e308],), ExpectedItems(1), "non-finite"),
    (({"values": [1.0]},), ExpectedItems(1), "not a list"),
    (([],), ExpectedItems(1), "different (or no) lengths"),
])
def test_a_vector_that_is_not_what_was_asked_is_a_protocol_failure(
        vectors: tuple[Any, ...], expect: ExpectedItems, problem: str) -> None:
    m = whole_response(answer(*vectors), 0, 1, 200, expect=expect)
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail is not None
    assert problem in m.error_detail
    assert m.items is None


def test_json_infinities_are_refused_as_malformed() -> None:
    raw = b'{"data": [{"index": 0, "embedding": [NaN, 1.0]}]}'
    assert whole_response(raw, 0, 1, 200).error_class is ErrorClass.PROTOCOL


def test_no_vectors_at_all_is_empty_and_a_missing_list_is_protocol() -> None:
    assert whole_response(answer(), 0, 1, 200).error_class is ErrorClass.EMPTY
    assert whole_response(b'{"object": "list"}', 0, 1, 200).error_class is ErrorClass.PROTOCOL


def test_indices_must_name_each_input_once() -> None:
    raw = json.dumps({"data": [{"index": 0, "embedding": [1.0]},
                               {"index": 0, "embedding": [2.0]}]}).encode()
    m = whole_response(raw, 0, 1, 200, expect=ExpectedItems(2))
    assert m.error_class is ErrorClass.PROTOCOL


def test_base64_vectors_are_decoded_and_checked() -> None:
    good = base64.b64encode(np.array([0.5, -0.5, 1.0], dtype="<f4").tobytes()).decode()
    bad = base64.b64encode(np.array([0.5, np.nan, 1.0], dtype="<f4").tobytes()).decode()
    assert vector_length(good) == 3
    assert vector_length(bad) == "embedding has a non-finite value"
    assert vector_length("not base64!") == "embedding is neither a list of numbers nor base64"
