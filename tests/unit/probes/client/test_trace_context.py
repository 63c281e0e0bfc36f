"""Every probe request's W3C traceparent: its form, a fresh trace for each request, and the
trace id the sample keeps."""

from __future__ import annotations

import re

from sustain.probes.client.trace_context import (
    HEADER,
    is_trace_id,
    span_id_of,
    trace_id_of,
    traced,
    traceparent,
    tracing,
    untraced,
)
from sustain.probes.protocols.openai_transcriptions import encode_transcription
from sustain.probes.protocols.streaming import encode_request

W3C_TRACEPARENT = re.compile(r"^00-(?P<trace>[0-9a-f]{32})-(?P<span>[0-9a-f]{16})-01$")


def test_a_traceparent_is_version_00_with_random_ids_and_the_sampled_flag() -> None:
    values = [traceparent() for _ in range(1000)]
    matches = [W3C_TRACEPARENT.match(value) for value in values]
    assert all(matches)
    traces = {m["trace"] for m in matches if m}
    spans = {m["span"] for m in matches if m}
    assert len(traces) == len(spans) == 1000
    assert "0" * 32 not in traces
    assert "0" * 16 not in spans


def test_every_encoded_request_carries_a_fresh_traceparent_whose_trace_id_is_read_back() -> None:
    body = {"model": "m", "messages": [], "stream": True}
    first, second = encode_request(body, {}), encode_request(body, {})
    ids = [trace_id_of(headers) for _, headers in (first, second)]
    assert all(i is not None and is_trace_id(i) for i in ids)
    assert ids[0] != ids[1]
    assert first[1][HEADER] == f"00-{ids[0]}-{first[1][HEADER][36:52]}-01"
    upload = encode_transcription({"model": "m"}, b"RIFF", {})
    assert W3C_TRACEPARENT.match(upload[1][HEADER])


def test_a_traceparent_given_with_the_headers_is_replaced_by_a_fresh_one() -> None:
    given = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    _, headers = encode_request({"model": "m"}, {HEADER: given, "x-other": "kept"})
    assert headers[HEADER] != given
    assert headers["x-other"] == "kept"


def test_untraced_requests_carry_no_traceparent_and_tracing_resumes_after() -> None:
    with untraced():
        assert not tracing()
        assert HEADER not in traced({})
        assert trace_id_of(encode_request({"model": "m"}, {})[1]) is None
    assert tracing()
    assert HEADER in traced({})


def test_only_32_lower_case_hex_digits_not_all_zero_are_a_trace_id() -> None:
    assert is_trace_id("0af7651916cd43dd8448eb211c80319c")
    for bad in ("0" * 32, "0AF7651916CD43DD8448EB211C80319C", "0af7651916cd43dd8448eb211c80319",
                "0af7651916cd43dd8448eb211c80319cc", "0af7651916cd43dd8448eb211c80319g", None,
                42):
        assert not is_trace_id(bad)


def test_the_parent_id_sent_is_the_trace_ids_last_sixteen_digits() -> None:
    """So a span exported later for the request can carry the id the server's span names as
    its parent, with nothing stored but the trace id."""
    for value in (traceparent() for _ in range(100)):
        match = W3C_TRACEPARENT.match(value)
        assert match is not None
        assert match["span"] == span_id_of(match["trace"]) == match["trace"][16:]
