"""A run's server series, summarised (pure): for each series its min, mean, max and last
value over the scrapes, and for a counter its increase over the run. Which series are counters
is the caller's knowledge (telemetry/families.py knows the servers' metric families)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pydantic import BaseModel

from sustain.probes.measure.finite import finite, mean

Point = tuple[float, float]
"""(unix seconds of the scrape, value)."""


class ServerMetric(BaseModel):
    """One server series over a run, as scraped."""

    min: float
    mean: float
    max: float
    last: float
    points: int
    increase: float | None = None
    """A counter's last minus first value (None for a gauge); a restart shows as negative."""
    span_s: float | None = None
    """Seconds from the first scrape with a point to the last (what `increase` spans)."""


class ScrapeCounts(BaseModel):
    scrapes: int
    failures: dict[str, int]
    """Failed scrapes by kind (`timeout`, `http 404`, `unreachable`, ...)."""


def summarise_series(series: Mapping[str, Sequence[Point]],
                     is_counter: Callable[[str], bool]) -> dict[str, ServerMetric]:
    """min, mean, max and last of every series that has points, and the increase of those
    `is_counter` names."""
    out: dict[str, ServerMetric] = {}
    for name, points in sorted(series.items()):
        values = [value for _, value in points]
        if not values:
            continue
        out[name] = ServerMetric(
            min=min(values), max=max(values), mean=mean(values), last=values[-1],
            points=len(values),
            increase=finite(values[-1] - values[0]) if is_counter(name) else None,
            span_s=finite(points[-1][0] - points[0][0]))
    return out
