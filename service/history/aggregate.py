"""Statistics of a window from the runs, hourly and daily rollups that cover it (pure).

Percentiles come from merged sketches, never from averaged percentiles; availability and
throughputs from summed counts (throughput = per second of measured time, warmups left out).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Literal, get_args

from sustain.probes.measure.confidence import min_samples
from sustain.probes.measure.finite import ratio
from sustain.probes.measure.percentiles import QUANTILES
from sustain.probes.measure.sketch import MetricSketch, SketchData, SketchMerger
from sustain.service.history.windows import Cover, cover

Stat = Literal["p50", "p90", "p95", "p99", "p999", "mean", "max", "availability",
               "request_throughput", "output_token_throughput", "goodput", "item_throughput",
               "retrieval_hit_rate"]
STATS: tuple[Stat, ...] = get_args(Stat)
LATENCY_STATS = frozenset({"p50", "p90", "p95", "p99", "p999", "mean", "max"})
SKETCHED_COUNTS = {"item_throughput": "items", "retrieval_hit_rate": "retrieval"}
"""Count statistics read from a sketch's exact sum and count: items per second of measured
time (embeddings inputs, rerank documents), and the share of RAG questions whose expected
passage was retrieved (run_sketches: 1 hit, 2 miss)."""


@dataclass(frozen=True, slots=True)
class Counts:
    """Summed over runs; what rollups and runs both store."""

    runs: int
    attempts: int
    successes: int
    good: int
    good_measured_s: float
    output_tokens: int
    measured_s: float


@dataclass(frozen=True, slots=True)
class Piece:
    """One stored aggregate: a rollup bucket or a run, at `start` (epoch seconds)."""

    start: float
    counts: Counts


@dataclass(frozen=True, slots=True)
class SketchPiece:
    start: float
    metric: str
    sketch: SketchData


@dataclass(slots=True)
class Aggregate:
    runs: int = 0
    attempts: int = 0
    successes: int = 0
    good: int = 0
    good_measured_s: float = 0.0
    output_tokens: int = 0
    measured_s: float = 0.0
    mergers: dict[str, SketchMerger] = field(default_factory=dict)

    def add_counts(self, counts: Counts) -> None:
        self.runs += counts.runs
        self.attempts += counts.attempts
        self.successes += counts.successes
        self.good += counts.good
        self.good_measured_s += counts.good_measured_s
        self.output_tokens += counts.output_tokens
        self.measured_s += counts.measured_s

    def add_sketch(self, metric: str, data: SketchData) -> None:
        merger = self.mergers.get(metric)
        if merger is None:
            merger = self.mergers[metric] = SketchMerger()
        merger.add(data)

    def sketch(self, metric: str) -> MetricSketch:
        merger = self.mergers.get(metric)
        return MetricSketch() if merger is None else merger.result()


@dataclass(frozen=True, slots=True)
class StatValue:
    value: float | None
    count: int
    """Values behind a latency statistic; attempts behind availability; successes behind the
    throughputs; good requests behind goodput."""
    low_count: bool
    """True when `count` is too small for the statistic to be trusted (a percentile without
    a 99 % confidence bound, or no data at all)."""


@cache
def _min_count(stat: str) -> int:
    return min_samples(QUANTILES[stat]) if stat in QUANTILES else 1


def latency_stat(sketch: MetricSketch, stat: str) -> StatValue:
    count = sketch.count
    if stat in QUANTILES:
        value = sketch.quantile(QUANTILES[stat])
    elif stat == "mean":
        value = sketch.mean
    else:
        value = sketch.max if count else None
    return StatValue(value, count, count < _min_count(stat))


def _rate(numerator: float, seconds: float) -> float | None:
    """numerator per second of `seconds`; None over no time, or past the float range (a
    count over a denormal time)."""
    return ratio(numerator, seconds)


def count_stat(agg: Aggregate, stat: str) -> StatValue:
    if stat == "availability":
        value = ratio(agg.successes, agg.attempts)
        return StatValue(value, agg.attempts, agg.attempts == 0)
    if stat == "request_throughput":
        return StatValue(_rate(agg.successes, agg.measured_s), agg.successes, agg.runs == 0)
    if stat == "output_token_throughput":
        return StatValue(_rate(agg.output_tokens, agg.measured_s), agg.successes, agg.runs == 0)
    if stat == "goodput":
        return StatValue(_rate(agg.good, agg.good_measured_s), agg.good,
                         agg.good_measured_s <= 0)
    if stat == "item_throughput":
        items = agg.sketch("items")
        return StatValue(_rate(items.sum, agg.measured_s) if items.count else None,
                         items.count, items.count == 0)
    if stat == "retrieval_hit_rate":
        return StatValue(hit_rate(agg.sketch("retrieval")), agg.sketch("retrieval").count,
                         agg.sketch("retrieval").count == 0)
    raise ValueError(f"unknown statistic {stat}")


def hit_rate(retrieval: MetricSketch) -> float | None:
    """The hit share of a `retrieval` sketch (1 per hit, 2 per miss: mean = 1 + misses)."""
    mean = retrieval.mean
    return None if mean is None else 2.0 - mean


@dataclass(frozen=True, slots=True)
class Plan:
    """Which stored pieces feed which window."""

    windows: list[tuple[float, float]]
    covers: list[Cover]

    @property
    def days(self) -> set[int]:
        return {d for c in self.covers for d in c.days}

    @property
    def hours(self) -> set[int]:
        return {h for c in self.covers for h in c.hours}

    @property
    def needs_runs(self) -> bool:
        return any(c.runs for c in self.covers)


def plan(windows: Sequence[tuple[float, float]]) -> Plan:
    return Plan(list(windows), [cover(a, b) for a, b in windows])


def assemble(p: Plan, days: Iterable[Piece], hours: Iterable[Piece], runs: Iterable[Piece],
             day_sketches: Iterable[SketchPiece], hour_sketches: Iterable[SketchPiece],
             run_sketches: Iterable[SketchPiece]) -> list[Aggregate]:
    """One Aggregate per window, from the pieces of its cover (others are ignored: a rollup
    hour inside a day already counted, a run inside a rollup hour)."""
    aggregates = [Aggregate() for _ in p.windows]
    wanted_days, wanted_hours = p.days, p.hours
    starts = [a for a, _ in p.windows]

    def target(start: float, kind: str) -> Aggregate | None:
        index = bisect.bisect_right(starts, start) - 1
        if index < 0 or start >= p.windows[index][1]:
            return None
        c = p.covers[index]
        if kind == "day":
            ok = int(start) in wanted_days
        elif kind == "hour":
            ok = int(start) in wanted_hours
        else:
            ok = any(a <= start < b for a, b in c.runs)
        return aggregates[index] if ok else None

    for kind, pieces in (("day", days), ("hour", hours), ("run", runs)):
        for piece in pieces:
            if (agg := target(piece.start, kind)) is not None:
                agg.add_counts(piece.counts)
    for kind, sketches in (("day", day_sketches), ("hour", hour_sketches),
                           ("run", run_sketches)):
        for sp in sketches:
            if (agg := target(sp.start, kind)) is not None:
                agg.add_sketch(sp.metric, sp.sketch)
    return aggregates
