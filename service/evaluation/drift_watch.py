"""Which metric statistics drift findings watch: the `drift_metrics` setting, parsed. Pure, so
the settings can validate it without importing the alerting layer."""

from __future__ import annotations

from sustain.probes.measure.run_sketches import METRICS
from sustain.service.history.aggregate import LATENCY_STATS


def parse_watched(spec: str) -> list[tuple[str, str]]:
    """`ttft:p99,e2e:p99` as (metric, stat) pairs, in order (blank items skipped); ValueError
    naming the first pair whose metric is not a sketched latency metric or whose stat is not
    a latency statistic."""
    pairs: list[tuple[str, str]] = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        metric, _, stat = item.partition(":")
        if metric not in METRICS or stat not in LATENCY_STATS:
            raise ValueError(f"drift_metrics: {item!r} is not metric:stat with metric one of "
                             f"{', '.join(METRICS)} and stat one of "
                             f"{', '.join(sorted(LATENCY_STATS))}")
        pairs.append((metric, stat))
    return pairs
