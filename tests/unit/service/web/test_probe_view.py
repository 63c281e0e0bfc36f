"""A probe page's pieces: chart windows fine enough for a young probe and from whole hours for
an old one, a run's row in words (a p99 from too few samples marked), a load profile in a few
words, a chart per latency (TTFT, TPOT, ITL, E2E) that says why it is empty."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from sustain.probes.measure.sketch import MetricSketch
from sustain.service.history.aggregate import Aggregate, Counts
from sustain.service.web.probe_view import (
    CHART_POINTS,
    LOW_COUNT_MARK,
    chart_spans,
    describe_profile,
    probe_charts,
    run_line,
)

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def test_a_young_probe_gets_minute_windows_of_at_least_its_interval() -> None:
    spans = chart_spans(NOW - timedelta(minutes=10), NOW, 15)
    widths = {round(b - a) for a, b in spans[1:-1]}
    assert widths == {60}
    assert spans[0][0] == (NOW - timedelta(minutes=10)).timestamp(), "clipped to the start"
    assert spans[-1][1] == NOW.timestamp()
    assert {round(b - a) for a, b in chart_spans(NOW - timedelta(minutes=10), NOW, 300)[1:-1]
            } <= {300}


def test_a_month_gets_whole_hour_windows_and_about_the_chart_points() -> None:
    spans = chart_spans(NOW - timedelta(days=30), NOW, 60)
    assert all(round(b - a) % 3600 == 0 for a, b in spans[1:-1])
    assert CHART_POINTS / 2 <= len(spans) <= CHART_POINTS + 2


def test_a_run_row_says_its_error_or_what_it_found() -> None:
    failed = run_line(7, "failed", "default", NOW, {"availability": 0.0,
                                                     "errors": {"connect": 20}}, None)
    assert (failed.availability, failed.note) == ("0.00%", "connect 20")
    capacity = run_line(8, "succeeded", "default", NOW, {
        "capacity": {"max_passing": 8, "unit": "concurrency"},
        "ttft_ms": {"p99": 51.2}}, None)
    assert (capacity.note, capacity.ttft_p99) == ("capacity 8 users", "51 ms")
    crashed = run_line(9, "failed", "default", NOW, None, "worker exited")
    assert (crashed.note, crashed.ttft_p99) == ("worker exited", "-")


def test_a_profile_reads_in_a_few_words() -> None:
    assert describe_profile({"kind": "constant", "rate": 2.0, "duration_s": 5.0}) == (
        "constant 2 req/s for 5 s")
    assert describe_profile({"kind": "capacity", "minimum": 1, "maximum": 16,
                             "duration_s": 2.0}) == "capacity search 1 to 16 users, 2 s a level"
    assert describe_profile({"kind": "single"}) == "single"


def test_a_capacity_probe_gets_a_capacity_chart_where_no_level_passing_is_zero() -> None:
    charts = probe_charts([], [], [(NOW, 8.0), (NOW + timedelta(minutes=2), None)],
                          NOW.timestamp() - 60, NOW.timestamp() + 180, "users")
    assert charts.capacity is not None
    assert charts.capacity.y_label == "capacity under SLO (users)"
    assert [float(m.title.rsplit(": ", 1)[1]) for m in charts.capacity.lines[0].marks] == [
        8.0, 0.0]
    assert charts.latency.empty is not None, "no runs: the latency chart says why"
    assert probe_charts([], [], None, 0.0, 60.0, "users").capacity is None


def test_a_runs_p99_from_too_few_samples_is_marked_as_the_cli_marks_it() -> None:
    few = run_line(3, "succeeded", "default", NOW, {
        "ttft_ms": {"p99": 51.2, "count": 40, "low_count": ["p99", "p999"]},
        "e2e_ms": {"p99": 812.0, "count": 40, "low_count": []}}, None)
    assert few.ttft_p99 == "51 ms" + LOW_COUNT_MARK
    assert few.e2e_p99 == "812 ms"
    assert few.low_count
    none = run_line(4, "failed", "default", NOW, {
        "ttft_ms": {"count": 0, "low_count": ["p50", "p99"]}}, None)
    assert (none.ttft_p99, none.low_count) == ("-", False), "no value, nothing to mark"


def _window(rng: random.Random) -> Aggregate:
    agg = Aggregate()
    agg.add_counts(Counts(runs=1, attempts=20, successes=20, good=20, good_measured_s=1,
                          output_tokens=180, measured_s=1))
    for metric, low, high in (("ttft", 40, 60), ("tpot", 8, 12), ("itl", 5, 15),
                              ("e2e", 120, 200)):
        agg.add_sketch(metric, MetricSketch.of([rng.uniform(low, high)
                                                for _ in range(20)]).to_bytes())
    return agg


def test_a_probe_page_charts_tpot_and_itl_beside_ttft_and_e2e() -> None:
    rng = random.Random(2)
    spans = [(NOW.timestamp() - 600 + 60 * i, NOW.timestamp() - 540 + 60 * i)
             for i in range(10)]
    charts = probe_charts(spans, [_window(rng) for _ in spans], None, spans[0][0],
                          NOW.timestamp(), "users")
    assert [c.y_label for c in (charts.latency, charts.tpot, charts.itl, charts.e2e)] == [
        "TTFT (ms)", "TPOT (ms)", "ITL (ms)", "end-to-end latency (ms)"]
    for chart in (charts.tpot, charts.itl):
        assert chart.empty is None
        assert [line.name for line in chart.lines] == ["p50", "p99"]
        assert len(chart.lines[1].marks) == len(spans)
    itl_top = max(float(m.title.rsplit(": ", 1)[1]) for m in charts.itl.lines[1].marks)
    assert 5 <= itl_top <= 15, "the ITL chart draws the ITL sketches, not another metric's"


def test_an_empty_latency_chart_says_whether_runs_finished_or_none_succeeded() -> None:
    spans = [(NOW.timestamp() - 60, NOW.timestamp())]
    failed = Aggregate()
    failed.add_counts(Counts(runs=1, attempts=5, successes=0, good=0, good_measured_s=0,
                             output_tokens=0, measured_s=1))
    charts = probe_charts(spans, [failed], None, spans[0][0], spans[0][1], "users")
    assert charts.latency.empty == "No request in this window succeeded."
    assert "two output tokens" in (charts.tpot.empty or "")
    assert "streamed" in (charts.itl.empty or "")
    idle = probe_charts(spans, [Aggregate()], None, spans[0][0], spans[0][1], "users")
    assert idle.itl.empty == "No finished run in this window yet."
