"""Where a chart's axis ticks go and what they read (pure): round numbers for values (steps of
1, 2 or 5 times a power of ten) and round times for time axes (a minute, five, fifteen, an
hour, six, a day...), so a reader can tell a chart's scale at a glance."""

from __future__ import annotations

import math
from datetime import UTC, datetime

TIME_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800,
                21_600, 43_200, 86_400, 172_800, 604_800, 2_592_000)
"""Tick spacings a time axis may use, seconds."""


def nice_step(span: float, count: int) -> float:
    """The round step (1, 2 or 5 times 10^k) giving about `count` intervals over `span`."""
    raw = span / max(1, count)
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    for factor in (1.0, 2.0, 5.0, 10.0):
        if raw <= factor * power:
            return factor * power
    return 10.0 * power


def value_range(low: float, high: float, count: int = 4, from_zero: bool = False
                ) -> tuple[float, float, list[float]]:
    """An axis range covering [low, high] out to round ticks, and those ticks. `from_zero`
    starts it at 0 (for magnitudes whose zero means something, such as a latency); a range
    of one value gets some room around it."""
    if from_zero:
        low = min(0.0, low)
    if high <= low:
        pad = abs(high) * 0.1 or 1.0
        low, high = (low if from_zero else low - pad), high + pad
    step = nice_step(high - low, count)
    first = math.floor(low / step) * step
    last = math.ceil(high / step) * step
    ticks = []
    value = first
    while value <= last + step / 2:
        ticks.append(round(value, 12))
        value += step
    return first, last, ticks


def value_label(value: float, step: float) -> str:
    """A tick's number with as many decimals as its step needs, thousands separated."""
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 and step < 1 else 0
    return f"{value:,.{decimals}f}"


def time_ticks(start: float, end: float, count: int = 4) -> list[float]:
    """Round Unix times within [start, end], about `count` intervals apart."""
    span = max(end - start, 1.0)
    step = next((s for s in TIME_STEPS_S if span / s <= count), TIME_STEPS_S[-1])
    first = math.ceil(start / step) * step
    return [float(t) for t in range(int(first), int(end) + 1, step)]


def time_label(at: float, span_s: float) -> str:
    """A time tick in UTC: seconds when the axis spans minutes, the date when it spans
    days."""
    moment = datetime.fromtimestamp(at, UTC)
    if span_s <= 600:
        return f"{moment:%H:%M:%S}"
    if span_s <= 2 * 86_400:
        return f"{moment:%H:%M}"
    return f"{moment:%b %d}"
