"""Arithmetic whose results are finite numbers or None, never NaN or an infinity (pure).

JSON has no number for NaN or an infinity, so a figure that is undefined (a rate over no
time, the coefficient of variation of values whose mean is 0) or that would not fit in a
float (a quotient by a denormal, the sum of values near the float maximum) is None here,
never a number that storage or a client refuses. Every function is defined for no values,
one value, equal values, zeros and values up to the float maximum."""

from __future__ import annotations

import math
from collections.abc import Sequence


def finite(value: float | None) -> float | None:
    """`value` when it is a finite number; None for None, NaN and the infinities."""
    return value if value is not None and math.isfinite(value) else None


def ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator, in their units' quotient; None when the denominator is not a
    finite number > 0 (a rate over no time is undefined) or the quotient does not fit in a
    float (a finite count over a denormal duration)."""
    if not math.isfinite(denominator) or denominator <= 0:
        return None
    return finite(numerator / denominator)


def total(values: Sequence[float]) -> float:
    """The exact (fsum) sum of finite `values`, in their unit; an infinity when the true sum
    is beyond the float range (fsum raises there instead), so callers check the results
    they derive from it."""
    try:
        return math.fsum(values)
    except OverflowError:
        return math.copysign(math.inf, math.fsum(v / len(values) for v in values))


def mean(values: Sequence[float]) -> float | None:
    """The arithmetic mean of finite `values`, in their unit; None when there are none. The
    sum of values near the float maximum overflows, so the values are then divided first
    (the mean itself always fits between the least and the greatest value)."""
    n = len(values)
    if n == 0:
        return None
    try:
        return math.fsum(values) / n
    except OverflowError:
        return math.fsum(v / n for v in values)


def halfway(low: float, high: float) -> float:
    """(low + high) / 2 for finite values, without the overflow of their sum near the float
    maximum (the same number otherwise: halving is exact)."""
    middle = (low + high) / 2
    return middle if math.isfinite(middle) else low / 2 + high / 2


_SAFE_SCALE = (1e-100, 1e100)
"""Values whose greatest magnitude is within these are used as they are (their squares,
times any count of them, fit in a float); others are divided by that magnitude first."""


def _usable(values: Sequence[float]) -> list[float] | None:
    """`values` ready for squares and products: as they are within _SAFE_SCALE, else over
    their greatest magnitude (within [-1, 1]); None when they are all 0 or one is not finite.
    The CoV and the relative drift are ratios of one unit, so the scale does not change
    them."""
    if not all(math.isfinite(v) for v in values):
        return None
    scale = max((abs(v) for v in values), default=0.0)
    if scale == 0:
        return None
    if _SAFE_SCALE[0] <= scale <= _SAFE_SCALE[1]:
        return list(values)
    return [v / scale for v in values]


def _centred(values: Sequence[float]) -> tuple[list[float], float] | None:
    """The usable values and their mean, when there are two or more and the mean is > 0."""
    if len(values) < 2:
        return None
    usable = _usable(values)
    if usable is None:
        return None
    centre = math.fsum(usable) / len(usable)
    return (usable, centre) if centre > 0 else None


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation over the mean (unitless) of finite `values`: 0.0 for equal
    values whose mean is > 0; None with fewer than two values (no sample deviation), when
    the mean is not > 0 (values all 0: the CoV is undefined) or a value is not finite."""
    centred = _centred(values)
    if centred is None:
        return None
    usable, centre = centred
    if all(v == usable[0] for v in usable):
        return 0.0
    sd = math.sqrt(math.fsum((v - centre) ** 2 for v in usable) / (len(usable) - 1))
    return ratio(sd, centre)


def relative_drift(values: Sequence[float]) -> float | None:
    """How far the least-squares line through finite `values` (at positions 0, 1, ...) rises
    or falls over their span, over their mean (unitless, >= 0): 0.0 for equal values whose
    mean is > 0; None with fewer than two values (no line), when the mean is not > 0 or a
    value is not finite."""
    centred = _centred(values)
    if centred is None:
        return None
    usable, centre = centred
    if all(v == usable[0] for v in usable):
        return 0.0
    n = len(usable)
    x_mean = (n - 1) / 2
    slope = math.fsum((x - x_mean) * (v - centre) for x, v in enumerate(usable)) / \
        math.fsum((x - x_mean) ** 2 for x in range(n))
    return ratio(abs(slope * (n - 1)), centre)
