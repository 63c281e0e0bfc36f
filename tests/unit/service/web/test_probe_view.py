"""A probe page's pieces: chart windows fine enough for a young probe and from whole hours for
an old one, a run's row in words, a load profile in a few words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sustain.service.web.probe_view import (
    CHART_POINTS,
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
