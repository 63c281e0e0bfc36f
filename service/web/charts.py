"""Inline SVG charts for the pages and the report file. Pure: values in, SVG attributes
out; the templates draw them (axis_chart.svg.html) without any script."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sustain.service.web.axes import time_label, time_ticks, value_label, value_range


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
class Tick:
    at: float
    """Pixel position along its axis."""
    label: str


@dataclass(frozen=True, slots=True)
class Mark:
    """A point drawn on its own, with what it is in words (its tooltip)."""

    x: float
    y: float
    title: str
    verdict: str = ""
    """"pass" or "fail" where the point passed or failed a test (drawn apart), else ""."""


@dataclass(frozen=True, slots=True)
class Line:
    name: str
    color: int
    """Index of the palette colour (c0..c3)."""
    paths: list[str]
    """SVG path data, one per unbroken stretch (a missing value breaks the line)."""
    marks: list[Mark]


@dataclass(frozen=True, slots=True)
class AxisChart:
    """A chart with both axes ticked and labelled with their units; `empty` says why there
    is nothing to draw instead of an empty frame."""

    width: int
    height: int
    left: float
    top: float
    right: float
    bottom: float
    """The plot area, pixels."""
    x_label: str
    y_label: str
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    lines: list[Line]
    empty: str | None = None
    verdicts: bool = False
    """Whether points carry pass/fail verdicts (the legend explains the two marks)."""
    bars: list[Bar] = field(default_factory=list)
    """A histogram's bars."""


Point = tuple[float, float | None]
Verdict = tuple[float, float, str, str]
"""(x, y, verdict, title): a point of an x-y chart."""


def _frame(width: int, height: int, small: bool) -> tuple[float, float, float, float]:
    return ((42.0, 8.0, width - 8.0, height - 22.0) if small
            else (64.0, 12.0, width - 16.0, height - 44.0))


def _empty(width: int, height: int, x_label: str, y_label: str, why: str) -> AxisChart:
    return AxisChart(width, height, 0, 0, 0, 0, x_label, y_label, [], [], [], why)


def _linear(low: float, high: float, start: float, end: float) -> Callable[[float], float]:
    """Values in [low, high] onto pixels from `start` to `end` (either way round)."""
    span = (high - low) or 1.0
    return lambda value: round(start + (value - low) / span * (end - start), 1)


def _step(ticks: Sequence[float]) -> float:
    """The spacing of an axis's ticks (1 when it has a single one)."""
    return ticks[1] - ticks[0] if len(ticks) > 1 else 1.0


def time_chart(series: Sequence[tuple[str, Sequence[Point]]], start: float, end: float,
               y_label: str, empty: str, width: int = 560, height: int = 220,
               small: bool = False) -> AxisChart:
    """Values over time: x from `start` to `end` (Unix s, UTC ticks), y from 0 to a round
    number above the largest value; each series a line through its points in time order,
    broken where a value is missing, each point marked with its time and value."""
    values = [v for _, points in series for _, v in points if v is not None]
    if not values:
        return _empty(width, height, "time (UTC)", y_label, empty)
    left, top, right, bottom = _frame(width, height, small)
    end = max(end, start + 1.0)
    y_low, y_high, y_ticks = value_range(min(values), max(values), 2 if small else 4,
                                         from_zero=True)
    y_step = _step(y_ticks)
    x_at, y_at = _linear(start, end, left, right), _linear(y_low, y_high, bottom, top)

    span = end - start
    lines = []
    for index, (name, points) in enumerate(series):
        paths: list[str] = []
        marks: list[Mark] = []
        stretch: list[str] = []
        for x, y in [*sorted(points, key=lambda p: p[0]), (math.inf, None)]:
            if y is None:
                if len(stretch) > 1:
                    paths.append(" ".join(stretch))
                stretch = []
                continue
            px, py = x_at(x), y_at(y)
            stretch.append(f"{'M' if not stretch else 'L'} {px} {py}")
            marks.append(Mark(px, py, f"{name} {time_label(x, span)} UTC: "
                                      f"{value_label(y, y_step / 10)}"))
        lines.append(Line(name, index % 4, paths, marks))
    x_ticks = [Tick(x_at(t), time_label(t, span))
               for t in time_ticks(start, end, 2 if small else 4)]
    return AxisChart(width, height, left, top, right, bottom, "time (UTC)", y_label, x_ticks,
                     [Tick(y_at(v), value_label(v, y_step)) for v in y_ticks], lines)


def xy_chart(series: Sequence[tuple[str, Sequence[Verdict]]], x_label: str, y_label: str,
             empty: str, step: bool = False, x_from_zero: bool = False,
             y_from_zero: bool = True, width: int = 560, height: int = 280) -> AxisChart:
    """Points against a numeric x, on axes that span the data out to round ticks (so points
    close together stay apart); `step` joins each series as a step function in x order (as
    MLPerf Endpoints draws a Pareto curve: no interpolation), else as straight lines. A
    point's verdict ("pass"/"fail") is drawn apart."""
    xs = [x for _, points in series for x, _, _, _ in points]
    ys = [y for _, points in series for _, y, _, _ in points]
    if not xs:
        return _empty(width, height, x_label, y_label, empty)
    left, top, right, bottom = _frame(width, height, False)
    x_low, x_high, x_ticks = value_range(min(xs), max(xs), 5, x_from_zero)
    y_low, y_high, y_ticks = value_range(min(ys), max(ys), 4, y_from_zero)
    x_at, y_at = _linear(x_low, x_high, left, right), _linear(y_low, y_high, bottom, top)

    lines = []
    for index, (name, points) in enumerate(series):
        ordered = sorted(points, key=lambda p: p[0])
        path: list[str] = []
        for x, y, _, _ in ordered:
            px, py = x_at(x), y_at(y)
            path.append(f"M {px} {py}" if not path else (f"H {px} V {py}" if step
                                                          else f"L {px} {py}"))
        marks = [Mark(x_at(x), y_at(y), title, verdict) for x, y, verdict, title in ordered]
        lines.append(Line(name, index % 4, [" ".join(path)] if len(path) > 1 else [], marks))
    return AxisChart(width, height, left, top, right, bottom, x_label, y_label,
                     [Tick(x_at(v), value_label(v, _step(x_ticks))) for v in x_ticks],
                     [Tick(y_at(v), value_label(v, _step(y_ticks))) for v in y_ticks], lines,
                     verdicts=any(v for _, points in series for _, _, v, _ in points))


def histogram(values: Sequence[float], x_label: str, empty: str, bins: int = 24,
              width: int = 560, height: int = 240) -> AxisChart:
    """Equal-width bins from the lowest to the highest value (the top 0.1 % of values cut,
    so one straggler does not squeeze the rest into a bar): bar heights scale with counts,
    on a value axis (x_label names it and its unit) and a count axis."""
    if not values:
        return _empty(width, height, x_label, "requests", empty)
    ordered = sorted(values)
    low = ordered[0]
    high = ordered[min(len(ordered) - 1, int(len(ordered) * 0.999))]
    if high <= low:
        high = low + (abs(low) * 0.01 or 1.0)
    counts = [0] * bins
    for value in ordered:
        counts[min(bins - 1, max(0, int((value - low) / (high - low) * bins)))] += 1
    left, top, right, bottom = _frame(width, height, False)
    x_low, x_high, x_ticks = value_range(low, high, 4)
    _, y_high, y_ticks = value_range(0.0, float(max(counts)), 3, from_zero=True)
    x_at, y_at = _linear(x_low, x_high, left, right), _linear(0.0, y_high, bottom, top)

    bars = []
    for index, count in enumerate(counts):
        edge = low + (high - low) * index / bins
        after = low + (high - low) * (index + 1) / bins
        x0, x1 = x_at(edge), x_at(after)
        bars.append(Bar(x0, y_at(count), round(max(x1 - x0 - 1, 1), 1),
                        round(bottom - y_at(count), 1),
                        f"{edge:,.1f} to {after:,.1f}: {count} requests"))
    return AxisChart(width, height, left, top, right, bottom, x_label, "requests",
                     [Tick(x_at(v), value_label(v, _step(x_ticks))) for v in x_ticks],
                     [Tick(y_at(v), value_label(v, 1.0)) for v in y_ticks], [], bars=bars)
