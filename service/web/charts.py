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
