"""The status page's pieces: charts, budget bars, state counts, paging and alert
lines (each probe's state is worked out in SQL: tests/integration/service/test_status_page.py)."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sustain.probes.measure.percentiles import quantile
from sustain.probes.measure.sketch import MetricSketch
from sustain.service.db.status import LatestRun, ProbeRow
from sustain.service.history.aggregate import Aggregate, Counts
from sustain.service.web.charts import budget_width
from sustain.service.web.view import (
    PROBES_PER_PAGE,
    alert_line,
    chart_windows,
    day_figures,
    page_href,
    paging,
    probe_card,
    run_notes,
    slo_bar,
    small_chart,
    state_counts,
    worst_slos,
)

PROBE = ProbeRow(1, "chat", "vllm", "m", True, 60, None, {}, "ok")
RUN = LatestRun(7, "succeeded", datetime(2026, 12, 3, tzinfo=UTC), None)


def test_a_card_chart_has_ticked_axes_over_the_time_the_probe_has_run() -> None:
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC).timestamp()
    spans = [(now - 600 + 60 * i, now - 540 + 60 * i) for i in range(10)]
    values: list[float | None] = [50.0, 52.0, None, 55.0, None, 51.0, 53.0, 50.0, 49.0, 60.0]
    chart = small_chart(spans, values, "TTFT", now)
    assert chart.empty is None
    assert chart.y_label == "TTFT p99 (ms)"
    assert chart.x_label == "time (UTC)"
    assert next(t.label for t in chart.y_ticks) == "0", "latency axes start at zero"
    assert chart.x_ticks
    assert all(":" in t.label for t in chart.x_ticks), "times of day"
    assert len(chart.lines[0].paths) == 2, "a missing value breaks the line; one alone is a dot"
    assert len(chart.lines[0].marks) == 8
    assert "no successful request" in (small_chart(spans, [None] * 10, "TTFT", now).empty or "")


def test_budget_bar_fill_and_state() -> None:
    assert budget_width(0.5) == 50.0
    assert budget_width(-0.2) == 0.0
    assert budget_width(None) == 0.0
    assert slo_bar("a", 0.99, 0.995, 0.5).state == "healthy"
    assert slo_bar("a", 0.99, 0.991, 0.1).state == "low"
    assert slo_bar("a", 0.99, 0.98, -1.0).state == "exhausted"
    assert slo_bar("a", 0.99, None, None).state == "no data"


def test_a_card_shows_the_state_worked_out_for_its_probe() -> None:
    day = day_figures([])
    assert probe_card(PROBE, RUN, day).state == "ok"
    cron = ProbeRow(2, "off", "vllm", "m", False, 60, "*/5 * * * *", {}, "disabled")
    card = probe_card(cron, None, day)
    assert (card.state, card.schedule, card.notes) == ("disabled", "cron */5 * * * *", [])


def test_state_counts_list_the_worst_states_first_each_with_its_filter_link() -> None:
    counts = state_counts({"ok": 9_000, "failing": 12, "disabled": 3, "down": 1, "waiting": 0})
    assert [(c.state, c.count) for c in counts] == [("down", 1), ("failing", 12), ("ok", 9_000),
                                                    ("disabled", 3)]
    assert counts[3].href == "/?state=disabled#probes"
    assert page_href(1, "no data") == "/?state=no+data#probes"
    assert page_href(1, None) == "/#probes"


def test_paging_links_every_page_of_probes_and_only_those() -> None:
    first = paging(1, 10_000, None)
    assert (first.pages, first.first, first.last) == (10_000 // PROBES_PER_PAGE, 1, 100)
    assert first.previous_href is None
    assert first.next_href == "/?page=2#probes"
    assert first.last_href == "/?page=100#probes"
    last = paging(100, 10_000, None)
    assert (last.first, last.last, last.next_href) == (9_901, 10_000, None)
    assert last.previous_href == "/?page=99#probes"
    partial = paging(2, 150, "failing")
    assert (partial.first, partial.last, partial.pages) == (101, 150, 2)
    assert partial.previous_href == "/?state=failing#probes"
    beyond = paging(7, 150, None, shown=0)
    assert (beyond.first, beyond.last, beyond.next_href) == (0, 0, None)
    assert beyond.previous_href == "/?page=2#probes", "back to the last page that has probes"
    assert paging(1, 0, None).pages == 1


def test_the_slos_shown_are_those_with_the_least_budget_left() -> None:
    bars = [slo_bar(f"s{i}", 0.99, None, b) for i, b in enumerate([0.9, None, -0.5, 0.2])]
    assert [b.name for b in worst_slos(bars, 3)] == ["s2", "s3", "s0"]
    assert [b.name for b in worst_slos(bars)] == ["s2", "s3", "s0", "s1"]


def test_alert_line_names_its_subject() -> None:
    line = alert_line("SustainSloBurnRate", "page", "firing",
                      {"alertname": "SustainSloBurnRate", "slo": "chat", "tier": "page_fast",
                       "severity": "page"}, {"summary": "burning"}, None)
    assert line.subject == "slo=chat tier=page_fast"
    assert line.summary == "burning"


def test_day_figures_merge_the_hours_instead_of_averaging_their_percentiles() -> None:
    rng = random.Random(3)
    hours = []
    values: list[float] = []
    for hour in range(24):
        agg = Aggregate()
        if hour % 5 == 4:
            hours.append(agg)  # an hour without runs
            continue
        batch = [rng.lognormvariate(4 + (hour == 10), 0.3) for _ in range(50)]
        values += batch
        agg.add_counts(Counts(runs=1, attempts=50, successes=45, good=45, good_measured_s=1,
                              output_tokens=0, measured_s=1))
        agg.add_sketch("ttft", MetricSketch.of(batch).to_bytes())
        hours.append(agg)
    day = day_figures(hours)
    assert day.availability == 0.9
    assert day.ttft_p99_ms is not None
    exact = quantile(sorted(values), 0.99)
    assert abs(day.ttft_p99_ms - exact) <= 0.01 * exact
    assert day.ttft_hourly[4] is None
    assert day.ttft_hourly[10] is not None
    assert day.e2e_p99_ms is None
    assert day.e2e_hourly == [None] * 24


def test_run_notes_say_what_the_run_measured_beyond_latency() -> None:
    assert run_notes(RUN) == []
    run = LatestRun(8, "succeeded", datetime(2026, 12, 4, tzinfo=UTC), None,
                    cache_hit_ratio=0.0, quality={"checked": 10, "passed": 4},
                    sessions={"conversations": 3, "completed": 2, "turns": 8,
                              "failed_turns": 1}, queue_max=6.0,
                    capacity={"unit": "concurrency", "max_passing": 8},
                    efficiency={"cost_per_million_good_tokens": 1.25, "currency": "EUR"})
    assert run_notes(run) == ["cache hits 0%", "canaries 4/10 passed",
                              "2/3 conversations completed", "server queue up to 6",
                              "capacity under SLO: 8 users",
                              "1.25 EUR per million good tokens"]


def test_run_notes_give_the_energy_per_token_and_where_the_power_came_from() -> None:
    measured = LatestRun(9, "succeeded", datetime(2026, 12, 4, tzinfo=UTC), None, efficiency={
        "joules_per_good_token": 0.8123, "joules_per_output_token": 0.5,
        "power_source": "measured"})
    assert run_notes(measured) == ["0.812 J per good token (measured power)"]
    declared = LatestRun(9, "succeeded", datetime(2026, 12, 4, tzinfo=UTC), None, efficiency={
        "joules_per_good_token": None, "joules_per_output_token": 1.5,
        "power_source": "declared"})
    assert run_notes(declared) == ["1.5 J per output token (declared power)"]


def test_a_new_probes_chart_draws_from_its_first_runs() -> None:
    now = datetime(2026, 12, 4, 12, 0, 30, tzinfo=UTC)
    fresh = chart_windows(now - timedelta(minutes=10), now, 15)
    assert len(fresh) >= 10  # minute windows, not one hourly dot
    assert all(b - a <= 60 for a, b in fresh)
    assert fresh[-1][1] == now.timestamp()
    sparse = chart_windows(now - timedelta(minutes=30), now, 300)
    assert all(b - a <= 300 for a, b in sparse)
    assert len(sparse) in (6, 7)  # one window per run at least
    day = chart_windows(now - timedelta(hours=24), now)
    assert 24 <= len(day) <= 25
    assert all(b - a <= 3600 for a, b in day)


def test_run_notes_give_each_kinds_own_figure() -> None:
    assert run_notes(replace(RUN, item_throughput=1234.5)) == ["1,234.5 items/s"]
    assert run_notes(replace(RUN, rtf_p50=0.0812)) == ["real-time factor 0.0812 (median)"]
    assert run_notes(replace(RUN, retrieval_hit_rate=0.825)) == ["retrieval hit rate 82%"]


def _day_of(values: list[float]) -> Aggregate:
    agg = Aggregate()
    agg.add_counts(Counts(runs=1, attempts=len(values), successes=len(values),
                          good=len(values), good_measured_s=1, output_tokens=0, measured_s=1))
    agg.add_sketch("ttft", MetricSketch.of(values).to_bytes())
    return agg


def test_a_day_p99_from_too_few_samples_is_marked_as_the_cli_marks_it() -> None:
    rng = random.Random(8)
    few = day_figures([_day_of([rng.uniform(40, 60) for _ in range(100)])])
    assert few.ttft_p99_ms is not None
    assert few.ttft_p99_low, "100 samples cannot bound a p99 at 99 % confidence"
    assert not few.e2e_p99_low, "no value, nothing to mark"
    many = day_figures([_day_of([rng.uniform(40, 60) for _ in range(2000)])])
    assert not many.ttft_p99_low
    card = probe_card(PROBE, RUN, few)
    assert (card.ttft_p99_low, card.e2e_p99_low) == (True, False)


def test_a_capacity_probes_card_says_its_figures_take_in_every_level() -> None:
    day = day_figures([])
    assert probe_card(PROBE, RUN, day, capacity=True).all_levels
    assert not probe_card(PROBE, RUN, day).all_levels
