"""Hypothesis strategies for sample sets a real run could produce, edge cases first: no
samples, one, all equal, zeros (TTFT 0, E2E 0, E2E == TTFT: every token in one read), huge
latencies (up to 1e300 ms) and many samples. Values are what a measurement can be: finite and
non-negative (a generator's lag alone may be negative: sent before it was due)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from sustain.probes.measure.sample import ErrorClass, Measurement, Sample

HUGE_MS = 1e300
"""The largest latency drawn: sums and differences of a few of them stay finite."""
SENT_AT = datetime(2026, 12, 4, tzinfo=UTC)

PROPERTY = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
"""Moderate and reproducible: the same examples on every run."""

latencies = st.one_of(
    st.just(0.0),
    st.sampled_from([5e-324, 1e-310, 1e-9, 1.0, 1e299, HUGE_MS]),
    st.floats(min_value=0.0, max_value=1e4),
    st.floats(min_value=0.0, max_value=HUGE_MS),
)
"""Non-negative ms, from 0 and denormals through everyday values to 1e300."""

durations = st.one_of(st.sampled_from([0.0, 5e-324, 1e-310, 1e-3, 1.0, 60.0, 1e300]),
                      st.floats(min_value=0.0, max_value=1e300))
"""Measured seconds: none, denormal, everyday, huge."""


@st.composite
def measurements(draw: st.DrawFn, *, fail: bool | None = None) -> Measurement:
    failed = draw(st.booleans()) if fail is None else fail
    ttft = None if failed and draw(st.booleans()) else draw(st.none() | latencies)
    e2e = (ttft or 0.0) + draw(latencies)
    tokens = draw(st.sampled_from([0, 1, 2, 10, 1_000_000]) | st.integers(0, 5000))
    inputs = draw(st.none() | st.integers(0, 200_000))
    return Measurement(
        ttft_ms=ttft, itl_ms=tuple(draw(st.lists(latencies, max_size=3))), e2e_ms=e2e,
        output_tokens=tokens, tokens_server_counted=draw(st.booleans()), input_tokens=inputs,
        http_status=500 if failed else 200,
        error_class=draw(st.sampled_from(list(ErrorClass))) if failed else None,
        cached_tokens=None if inputs is None else draw(st.none() | st.integers(0, inputs)),
        tool_call_ms=draw(st.none() | latencies),
        quality=None if failed else draw(st.none() | st.booleans()))


@st.composite
def samples(draw: st.DrawFn, seq: int = 0, *, fail: bool | None = None,
            sessions: bool | None = None) -> Sample:
    t_send = draw(st.floats(min_value=0.0, max_value=HUGE_MS) | st.just(float(seq)))
    t_sched = draw(st.none() | st.floats(min_value=0.0, max_value=HUGE_MS) | st.just(t_send))
    in_session = draw(st.booleans()) if sessions is None else sessions
    return Sample(
        seq=seq, stage=draw(st.integers(0, 2)), t_sched_ms=t_sched, t_send_ms=t_send,
        sent_at=SENT_AT, measurement=draw(measurements(fail=fail)),
        conversation=f"c{draw(st.integers(0, 3))}" if in_session else None,
        turn=draw(st.integers(0, 120)) if in_session else None,
        session_end=in_session and draw(st.booleans()))


def renumbered(template: Sample, count: int, gap_ms: float = 100.0) -> list[Sample]:
    """`count` copies of one sample, sent `gap_ms` apart: a set of equal measurements."""
    return [replace(template, seq=i, t_send_ms=i * gap_ms,
                    t_sched_ms=None if template.t_sched_ms is None else i * gap_ms)
            for i in range(count)]


def streamed(ttft: float, e2e: float, tokens: int, seq: int = 0) -> Sample:
    """A successful request sent at seq x 100 ms with these figures."""
    return Sample(seq=seq, stage=0, t_sched_ms=None, t_send_ms=seq * 100.0, sent_at=SENT_AT,
                  measurement=Measurement(
                      ttft_ms=ttft, itl_ms=(), e2e_ms=e2e, output_tokens=tokens,
                      tokens_server_counted=True, input_tokens=8, http_status=200,
                      error_class=None))


@st.composite
def stages(draw: st.DrawFn, min_size: int = 32, max_size: int = 64) -> list[Sample]:
    """A stage with enough completed requests to be cut into windows, of one kind: equal
    requests, zeros, every token in one read (TPOT 0), huge latencies, or anything."""
    n = draw(st.integers(min_size, max_size))
    kind = draw(st.sampled_from(["equal", "zero", "one_read", "huge", "any"]))
    if kind == "equal":
        return renumbered(streamed(draw(latencies), draw(latencies), draw(st.integers(0, 50))),
                          n)
    if kind == "zero":
        return [streamed(0.0, 0.0, draw(st.integers(0, 50)), i) for i in range(n)]
    if kind == "one_read":
        out = []
        for i in range(n):
            e2e = draw(latencies)
            out.append(streamed(e2e, e2e, 10, i))
        return out
    if kind == "huge":
        return [streamed(ttft := draw(st.floats(1e290, HUGE_MS)),
                         ttft + draw(st.floats(1e290, HUGE_MS)), 10, i) for i in range(n)]
    return [replace(draw(samples(i, fail=draw(st.booleans()) and i % 7 == 0)),
                    t_send_ms=i * 100.0, stage=0) for i in range(n)]


@st.composite
def sample_sets(draw: st.DrawFn) -> list[Sample]:
    """Any sample set: empty, one, a few of anything, many equal ones, or a whole stage."""
    kind = draw(st.sampled_from(["few", "one", "equal", "stage"]))
    if kind == "few":
        return [draw(samples(i)) for i in range(draw(st.integers(0, 8)))]
    if kind == "one":
        return [draw(samples())]
    if kind == "equal":
        return renumbered(draw(samples()), draw(st.integers(0, 80)))
    return draw(stages())
