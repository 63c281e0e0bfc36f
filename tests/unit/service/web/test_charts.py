"""Charts people can read: round ticks on both axes, ranges from the data (points close together
stay apart), units in the axis labels, pass and fail apart, and words where there is nothing to
draw."""

from __future__ import annotations

from datetime import UTC, datetime

from sustain.service.web.axes import nice_step, time_label, time_ticks, value_label, value_range
from sustain.service.web.charts import histogram, time_chart, xy_chart
from sustain.service.web.report import pareto_chart


def test_steps_are_one_two_or_five_times_a_power_of_ten() -> None:
    assert nice_step(100, 4) == 50
    assert nice_step(0.5, 5) == 0.1
    assert nice_step(7, 4) == 2
    assert nice_step(0, 4) == 1.0


def test_a_value_range_reaches_round_ticks_around_the_data() -> None:
    low, high, ticks = value_range(99.4, 99.9, 5)
    assert low <= 99.4
    assert high >= 99.9
    assert high - low < 1.0, "not from zero: points between 99.4 and 99.9 spread out"
    assert ticks[0] == low
    assert ticks[-1] == high
    assert value_range(3.0, 400.0, 4, from_zero=True)[0] == 0.0
    one = value_range(8.0, 8.0, 4)
    assert one[0] < 8.0 < one[1], "a single value gets room around it"


def test_labels_carry_the_decimals_their_step_needs() -> None:
    assert value_label(1500.0, 500.0) == "1,500"
    assert value_label(0.25, 0.05) == "0.25"


def test_time_ticks_fall_on_round_times_within_the_span() -> None:
    start = datetime(2026, 12, 3, 10, 7, 13, tzinfo=UTC).timestamp()
    ticks = time_ticks(start, start + 3 * 3600, 4)
    assert ticks
    assert all(t % 3600 == 0 for t in ticks)
    assert start <= ticks[0]
    assert ticks[-1] <= start + 3 * 3600
    assert time_label(ticks[0], 3 * 3600) == "11:00"
    assert time_label(start, 300) == "10:07:13"
    assert time_label(start, 7 * 86400) == "Dec 03"


def test_a_time_chart_with_no_values_says_why() -> None:
    chart = time_chart([("p99", [(0.0, None)])], 0.0, 60.0, "TTFT (ms)", "no run yet")
    assert chart.empty == "no run yet"
    assert chart.lines == []


def test_a_time_chart_puts_later_points_right_and_higher_values_up() -> None:
    chart = time_chart([("p99", [(10.0, 100.0), (50.0, 200.0)])], 0.0, 60.0, "TTFT (ms)",
                       "none")
    first, second = chart.lines[0].marks
    assert first.x < second.x
    assert second.y < first.y, "SVG y grows downwards"
    assert chart.left <= first.x <= chart.right
    assert "TTFT" not in first.title or "100" in first.title


def test_pass_and_fail_points_are_told_apart() -> None:
    chart = xy_chart([("tps", [(1.0, 10.0, "pass", "1"), (2.0, 20.0, "pass", "2"),
                               (4.0, 25.0, "fail", "4")])], "load (users)",
                     "output tokens/s", "none", x_from_zero=True)
    assert [m.verdict for m in chart.lines[0].marks] == ["pass", "pass", "fail"]
    assert chart.verdicts
    assert chart.x_ticks[0].label == "0"


def test_a_pareto_chart_spans_its_points_not_zero_to_the_maximum() -> None:
    points = [{"tps_per_user": 99.4 + i / 10, "system_tps": 100.0 * (i + 1), "level": i}
              for i in range(6)]
    chart = pareto_chart([("run", points)])
    xs = [m.x for m in chart.lines[0].marks]
    assert xs[-1] - xs[0] > (chart.right - chart.left) / 2, "spread across the width"
    assert float(chart.x_ticks[0].label) > 90
    assert chart.x_label.startswith("tokens/s per user")
    assert pareto_chart([]).empty


def test_a_histogram_has_a_value_axis_and_a_count_axis() -> None:
    chart = histogram([float(v) for v in range(50, 100)], "TTFT (ms)", "none")
    assert chart.x_label == "TTFT (ms)"
    assert chart.y_label == "requests"
    assert sum(int(b.label.rsplit(": ", 1)[1].split()[0]) for b in chart.bars) == 50
    assert chart.x_ticks
    assert chart.y_ticks
    assert histogram([], "TTFT (ms)", "No request succeeded").empty == "No request succeeded"
