"""Small inline SVG charts for the status page. Pure: values in, SVG attributes out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sparkline:
    """An SVG polyline per unbroken stretch of values (a missing value breaks the line)."""

    width: int
    height: int
    segments: list[str]
    """`points` attributes, one per stretch of two or more values."""
    dots: list[tuple[float, float]]
    """(x, y) of values standing alone (a line of one point would not show)."""
    low: float | None
    high: float | None


def sparkline(values: Sequence[float | None], width: int = 240, height: int = 40,
              pad: float = 3.0) -> Sparkline:
    """Scale values onto [pad, height - pad] (higher is up), evenly spaced over the width."""
    present = [v for v in values if v is not None]
    if not present:
        return Sparkline(width, height, [], [], None, None)
    low, high = min(present), max(present)
    span = high - low or 1.0
    step = (width - 2 * pad) / max(1, len(values) - 1)
    segments: list[str] = []
    dots: list[tuple[float, float]] = []
    current: list[tuple[float, float]] = []
    for i, value in enumerate([*values, None]):
        if value is None:
            if len(current) == 1:
                dots.append(current[0])
            elif current:
                segments.append(" ".join(f"{x:.1f},{y:.1f}" for x, y in current))
            current = []
            continue
        current.append((round(pad + i * step, 1),
                        round(height - pad - (value - low) / span * (height - 2 * pad), 1)))
    return Sparkline(width, height, segments, dots, low, high)


def budget_width(remaining: float | None) -> float:
    """Percent of a bar to fill for an error budget left (0 when spent or overspent)."""
    if remaining is None:
        return 0.0
    return round(max(0.0, min(1.0, remaining)) * 100, 1)


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str


@dataclass(frozen=True, slots=True)
class Histogram:
    width: int
    height: int
    bars: list[Bar]
    low: float | None
    high: float | None
    count: int


def histogram(values: Sequence[float], bins: int = 24, width: int = 360, height: int = 120,
              pad: float = 4.0) -> Histogram:
    """Equal-width bins from the lowest to the highest value (the top 0.1 % of values cut,
    so one straggler does not squeeze the rest into a bar): bar heights scale with counts."""
    if not values:
        return Histogram(width, height, [], None, None, 0)
    ordered = sorted(values)
    low = ordered[0]
    high = ordered[min(len(ordered) - 1, int(len(ordered) * 0.999))]
    span = (high - low) or 1.0
    counts = [0] * bins
    for value in ordered:
        counts[min(bins - 1, max(0, int((value - low) / span * bins)))] += 1
    top = max(counts)
    step = (width - 2 * pad) / bins
    bars = []
    for index, count in enumerate(counts):
        h = (height - 2 * pad) * count / top
        edge = low + span * index / bins
        bars.append(Bar(round(pad + index * step, 1), round(height - pad - h, 1),
                        round(max(step - 1, 1), 1), round(h, 1),
                        f"{edge:.1f}-{edge + span / bins:.1f} ms: {count}"))
    return Histogram(width, height, bars, low, high, len(values))


@dataclass(frozen=True, slots=True)
class Curve:
    name: str
    path: str
    """An SVG path: a step function through the points (held until the next one)."""
    dots: list[tuple[float, float, str]]
    """(x, y, title) of each point."""


@dataclass(frozen=True, slots=True)
class StepChart:
    width: int
    height: int
    curves: list[Curve]
    x_label: str
    y_label: str
    x_max: float | None
    y_max: float | None


def step_chart(curves: Sequence[tuple[str, Sequence[tuple[float, float]]]], x_label: str,
               y_label: str, width: int = 480, height: int = 260, pad: float = 30.0
               ) -> StepChart:
    """Curves on shared axes from 0 to the largest x and y of any of them, each a step
    function in x order (as MLPerf Endpoints draws its Pareto curve: no interpolation)."""
    points = [p for _, pts in curves for p in pts]
    if not points:
        return StepChart(width, height, [], x_label, y_label, None, None)
    x_max = max(x for x, _ in points) or 1.0
    y_max = max(y for _, y in points) or 1.0

    def at(x: float, y: float) -> tuple[float, float]:
        return (round(pad + x / x_max * (width - 2 * pad), 1),
                round(height - pad - y / y_max * (height - 2 * pad), 1))

    out = []
    for name, pts in curves:
        ordered = sorted(pts)
        if not ordered:
            continue
        steps: list[str] = []
        for index, (x, y) in enumerate(ordered):
            px, py = at(x, y)
            if index == 0:
                steps.append(f"M {px} {py}")
            else:
                steps.append(f"H {px} V {py}")
        dots = [(*at(x, y), f"{name}: {x:,.1f} / {y:,.1f}") for x, y in ordered]
        out.append(Curve(name, " ".join(steps), dots))
    return StepChart(width, height, out, x_label, y_label, x_max, y_max)
