"""The status page's pieces: sparklines, budget bars, probe states and alert lines."""

from __future__ import annotations

from datetime import UTC, datetime

from service.db.status import LatestRun, ProbeRow
from service.web.charts import budget_width, sparkline
from service.web.view import alert_line, down_states, probe_state, slo_bar

PROBE = ProbeRow(1, "chat", "vllm", "m", True, 60, None, {})
RUN = LatestRun(7, "succeeded", datetime(2026, 12, 3, tzinfo=UTC), None)


def test_sparkline_scales_high_values_up_and_breaks_on_gaps() -> None:
    chart = sparkline([10.0, 20.0, None, 30.0, None, 15.0, 25.0], width=100, height=20, pad=0)
    assert (chart.low, chart.high) == (10.0, 30.0)
    assert len(chart.segments) == 2
    first = [tuple(map(float, p.split(","))) for p in chart.segments[0].split()]
    assert first == [(0.0, 20.0), (16.7, 10.0)], "low at the bottom, higher is up"
    assert chart.dots == [(50.0, 0.0)], "a value standing alone is a dot"
    assert sparkline([None, None]).segments == []


def test_budget_bar_fill_and_state() -> None:
    assert budget_width(0.5) == 50.0
    assert budget_width(-0.2) == 0.0
    assert budget_width(None) == 0.0
    assert slo_bar("a", 0.99, 0.995, 0.5).state == "healthy"
    assert slo_bar("a", 0.99, 0.991, 0.1).state == "low"
    assert slo_bar("a", 0.99, 0.98, -1.0).state == "exhausted"
    assert slo_bar("a", 0.99, None, None).state == "no data"


def test_probe_state_prefers_firing_down_alerts_over_the_last_run() -> None:
    down = down_states([("SustainEndpointDown", "firing", {"probe": "chat"}),
                        ("SustainNoData", "pending", {"probe": "embed"})])
    assert down == {"chat": "down"}
    assert probe_state(PROBE, RUN, down) == "down"
    assert probe_state(PROBE, RUN, {}) == "ok"
    assert probe_state(PROBE, None, {}) == "waiting"
    failed = LatestRun(8, "failed", RUN.scheduled_for, None)
    assert probe_state(PROBE, failed, {}) == "failing"
    off = ProbeRow(2, "off", "vllm", "m", False, 60, None, {})
    assert probe_state(off, RUN, down) == "disabled"


def test_alert_line_names_its_subject() -> None:
    line = alert_line("SustainSloBurnRate", "page", "firing",
                      {"alertname": "SustainSloBurnRate", "slo": "chat", "tier": "page_fast",
                       "severity": "page"}, {"summary": "burning"}, None)
    assert line.subject == "slo=chat tier=page_fast"
    assert line.summary == "burning"
