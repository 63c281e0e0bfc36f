"""A run's HTTP phases: each phase over the requests that had it, the share sent on reused
connections, their sketches, and the line `sustain probe` prints (and its JSON)."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console

from sustain.probes.measure.run_sketches import stage_sketches
from sustain.probes.measure.sample import ErrorClass, Sample
from sustain.probes.measure.summary import summarise
from sustain.probes.report import json_report
from sustain.probes.report_tables import summary_table
from sustain.probes.run_result import RunResult
from tests.unit.probes.samples import sample


def opened(seq: int, connect_ms: float, ttfb_ms: float) -> Sample:
    """A request that opened its own https connection to a host name."""
    s = sample(seq)
    return replace(s, measurement=replace(
        s.measurement, dns_ms=2.0, connect_ms=connect_ms, tls_ms=5.0, ttfb_ms=ttfb_ms,
        connection_reused=False, trace_id=f"{seq + 1:032x}"))


def reused(seq: int, ttfb_ms: float) -> Sample:
    s = sample(seq)
    return replace(s, measurement=replace(s.measurement, ttfb_ms=ttfb_ms,
                                          connection_reused=True))


def runs() -> list[Sample]:
    """Two new connections, six reused ones, a failed request on a reused connection and
    one that never had a connection."""
    failed = sample(8, error=ErrorClass.HTTP_5XX, ttft=None, tokens=0)
    failed = replace(failed, measurement=replace(failed.measurement, ttfb_ms=1.0,
                                                 connection_reused=True))
    unconnected = sample(9, error=ErrorClass.CONNECT, ttft=None, tokens=0)
    return [opened(0, 10.0, 40.0), opened(1, 30.0, 60.0),
            *(reused(i, 45.0 + i) for i in range(2, 8)), failed, unconnected]


def test_each_phase_is_summarised_over_the_successful_requests_that_had_it() -> None:
    summary = summarise(runs(), 1.0)
    assert summary.connect_ms is not None
    assert summary.connect_ms.count == 2
    assert summary.connect_ms.p50 is not None
    assert 10.0 <= summary.connect_ms.p50 <= 30.0
    assert summary.dns_ms is not None
    assert summary.dns_ms.count == 2
    assert summary.tls_ms is not None
    assert summary.tls_ms.max == 5.0
    assert summary.ttfb_ms is not None
    assert summary.ttfb_ms.count == 8
    assert summary.ttfb_ms.max == 60.0
    # of the nine requests that had a connection, seven went on a reused one
    assert summary.connection_reused_ratio == 7 / 9


def test_a_run_whose_requests_told_no_phase_has_none() -> None:
    summary = summarise([sample(i) for i in range(3)], 1.0)
    assert (summary.dns_ms, summary.connect_ms, summary.tls_ms, summary.ttfb_ms,
            summary.connection_reused_ratio) == (None,) * 5


def test_phases_are_sketched_for_windows_of_successful_requests() -> None:
    sketches = stage_sketches(runs())
    assert sketches[(0, "connect")].count == 2
    assert sketches[(0, "dns")].count == 2
    assert sketches[(0, "tls")].count == 2
    assert sketches[(0, "ttfb")].count == 8


def test_the_results_show_one_line_of_phases_and_the_json_report_has_them() -> None:
    summary = summarise(runs(), 1.0)
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(summary_table(summary))
    line = next(row for row in out.getvalue().splitlines() if "HTTP phases" in row)
    for expected in ("dns 2.0 / 2.0", "connect ", "TLS 5.0 / 5.0", "TTFB ",
                     "77.78% on reused connections"):
        assert expected in line
    report = json_report(RunResult(runs(), summary))
    assert report["connect_ms"]["count"] == 2
    assert report["ttfb_ms"]["count"] == 8
    assert report["connection_reused_ratio"] == 7 / 9
    assert "dns_ms" not in json_report(RunResult([sample(0)], summarise([sample(0)], 1.0)))


def test_a_run_without_phases_prints_no_phase_line() -> None:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(
        summary_table(summarise([sample(0)], 1.0)))
    assert "HTTP phases" not in out.getvalue()
