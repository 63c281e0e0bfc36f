"""A dashboard and the status page agree: `histogram_quantile` over the latency histograms
sustain exports, scraped every minute for an hour, lands within 5 % of sustain's own window
percentile of the same requests where latencies are spread (5 ms to 60 s), within 10 % where
they sit in one narrow band, for every latency family, over 5 min and 1 h windows (a spread
quantile once at least MIN_TAIL values lie beyond it). The quantiles are computed twice: by
Prometheus's algorithm here, and by promtool from the scraped series (the real
implementation), which must give the same."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from sustain.service.probe_metrics import FINE_FROM_S, FINE_TO_S, LATENCY_FAMILIES
from tests.prometheus.promql import (
    Labels,
    histogram_quantile,
    promtool,
    run_unit_tests,
    selector,
)
from tests.prometheus.scenarios import MINUTES, SCENARIOS, SERIES, Hour, simulate_hour

STATS = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
WINDOWS = {"5m": 5, "1h": 60}
MIN_TAIL = 10
"""Values a quantile of spread latencies needs beyond it to be compared (p99: 1,000 in the
window, p90: 100; a narrow band's quantiles are compared whatever their count).
Where fewer form the tail, the quantile is a handful of values' and each side interpolates
them its own way (sustain between neighbouring values, Prometheus evenly across a bucket):
they can differ by more than a bucket's width (docs/prometheus.md#how-close)."""
EVAL_AT_S = MINUTES * 60 + 30
"""Half-way between two scrapes, so that a [w] range holds the scrapes of minutes
MINUTES-w+1..MINUTES whether its start is inclusive (Prometheus 2) or not (3)."""


@dataclass(frozen=True)
class Comparison:
    probe: str
    family: str
    stat: str
    window: str
    prometheus_s: float
    sustain_s: float
    tolerance: float

    @property
    def error(self) -> float:
        return self.prometheus_s / self.sustain_s - 1.0

    def __str__(self) -> str:
        return (f"{self.probe} {self.family} {self.stat} over {self.window}: "
                f"histogram_quantile {self.prometheus_s * 1000:.2f} ms, sustain "
                f"{self.sustain_s * 1000:.2f} ms ({self.error:+.1%}, allowed "
                f"{self.tolerance:.0%})")


def labels_of(probe: str) -> Labels:
    return tuple(sorted({**SERIES, "probe": probe}.items()))


def window_runs(minutes: int) -> tuple[int, range]:
    """The first scrape a [minutes] range at EVAL_AT_S holds, and the runs between it and the
    last: those its increase (and rate) counts."""
    first = MINUTES - minutes + 1
    return first, range(first + 1, MINUTES + 1)


def comparisons(hour: Hour) -> list[Comparison]:
    """Every scenario, latency family, statistic and window where sustain's value is within
    the fine buckets' range (5 ms to 60 s) and, for spread latencies, has MIN_TAIL values
    beyond it."""
    found = []
    for scenario in SCENARIOS:
        for family in LATENCY_FAMILIES:
            for window, minutes in WINDOWS.items():
                first, runs = window_runs(minutes)
                end = hour.buckets(family.name, MINUTES)[labels_of(scenario.probe)]
                start = hour.buckets(family.name, first)[labels_of(scenario.probe)]
                increase = {le: end[le] - start[le] for le in end}
                for stat, q in STATS.items():
                    sustain_ms, count = hour.sustain_quantile(scenario.probe, family.metric,
                                                              stat, runs)
                    assert sustain_ms is not None
                    assert count == increase[float("inf")], "the same requests on both sides"
                    if not FINE_FROM_S <= sustain_ms / 1000.0 <= FINE_TO_S \
                            or (not scenario.band and (1.0 - q) * count < MIN_TAIL):
                        continue
                    found.append(Comparison(scenario.probe, family.metric, stat, window,
                                            histogram_quantile(q, increase),
                                            sustain_ms / 1000.0, scenario.tolerance))
    return found


@pytest.fixture(scope="module")
def hour() -> Hour:
    return simulate_hour()


def test_histogram_quantile_agrees_with_sustains_window_percentiles(hour: Hour) -> None:
    found = comparisons(hour)
    off = [str(c) for c in found if abs(c.error) > c.tolerance]
    assert not off, "\n".join(off)
    # every family compared in both windows, from a few ms to tens of seconds
    assert {(c.family, c.window) for c in found} == {
        (f.metric, w) for f in LATENCY_FAMILIES for w in WINDOWS}
    assert min(c.sustain_s for c in found) < 0.010
    assert max(c.sustain_s for c in found) > 30.0


def test_the_5m_window_sees_a_regression_the_1h_window_dilutes(hour: Hour) -> None:
    p90 = {c.window: c for c in comparisons(hour)
           if (c.probe, c.family, c.stat) == ("typical", "ttft", "p90")}
    assert p90["5m"].sustain_s > 1.2 * p90["1h"].sustain_s
    assert p90["5m"].prometheus_s > 1.2 * p90["1h"].prometheus_s


def test_prometheus_computes_the_same_quantiles_from_the_scraped_series(
        hour: Hour, tmp_path: Path) -> None:
    """The scraped series as promtool input, minute by minute; each histogram_quantile as
    Prometheus evaluates it equals this module's (to 1 part in 10^6), so the agreement above
    is Prometheus's own."""
    promtool()
    found = comparisons(hour)
    probes = {c.probe for c in found}
    series = []
    for family in LATENCY_FAMILIES:
        name = f"{family.name}_bucket"
        for labels in hour.buckets(family.name, MINUTES):
            if dict(labels)["probe"] not in probes:
                continue
            for le in hour.buckets(family.name, MINUTES)[labels]:
                points = ["_"] + [
                    f"{hour.buckets(family.name, minute)[labels][le]:g}"
                    for minute in range(1, MINUTES + 1)]
                series.append({"series": selector(name, (*labels, ("le", _le(le)))),
                               "values": " ".join(points)})
    checks = [{
        "expr": (f"round(histogram_quantile({STATS[c.stat]}, sum by (le) (rate("
                 f"sustain_{c.family}_seconds_bucket{{probe=\"{c.probe}\"}}[{c.window}])))"
                 f" / {c.prometheus_s!r}, 0.000001)"),
        "eval_time": f"{EVAL_AT_S}s",
        "exp_samples": [{"labels": "{}", "value": 1}],
    } for c in found]
    result = run_unit_tests(tmp_path, [{"interval": "1m", "input_series": series,
                                        "promql_expr_test": checks}])
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)
