"""Judging load levels (pure): does a level meet a capacity SLO, and the figures of each
point of a capacity search or a Pareto curve, from the stages' summaries.

MLPerf Endpoints' definitions: `system_tps` is output tokens per second over all users (the
stage's output token throughput), `tps_per_user` is 1000 / TPOT p90 (ms), a user's own
streaming rate. A point is on the Pareto front when no other point has both at least its
system_tps and at least its tps_per_user, one of them higher."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from sustain.probes.measure.capacity_slo import PERCENTILE_FIELDS, CapacitySlo
from sustain.probes.measure.finite import ratio
from sustain.probes.measure.percentiles import Distribution
from sustain.probes.measure.summary import RunSummary

SLO_METRICS = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("ttfo_ms", "TTFO"), ("e2e_ms", "E2E"))


class Verdict(BaseModel):
    passed: bool
    reason: str
    """Why it failed (every broken condition), or what it met."""
    low_count: bool
    """A judged percentile had too few samples for its 99 % confidence bound."""


def verdict(summary: RunSummary, slo: CapacitySlo) -> Verdict:
    """Whether a level's summary meets `slo`: each named latency's percentile within its
    threshold, and availability at least min_success. A level with no successful request
    for a named metric fails."""
    field = PERCENTILE_FIELDS[slo.percentile]
    broken, met, low = [], [], False
    for name, label in SLO_METRICS:
        threshold = getattr(slo, name)
        if threshold is None:
            continue
        dist: Distribution | None = getattr(summary, name)
        value = None if dist is None else getattr(dist, field)
        low = low or (dist is not None and field in dist.low_count)
        if value is None:
            broken.append(f"no {label} measured")
        elif value > threshold:
            broken.append(f"{label} {field} {value:.1f} ms > {threshold:g} ms")
        else:
            met.append(f"{label} {field} {value:.1f} ms <= {threshold:g} ms")
    availability = summary.availability or 0.0
    if availability < slo.min_success:
        broken.append(f"success {availability:.3f} < {slo.min_success:g}")
    return Verdict(passed=not broken, reason="; ".join(broken or met), low_count=low)


def tps_per_user(summary: RunSummary) -> float | None:
    """1000 / TPOT p90 in ms (tokens per second one user sees); None without TPOT, and
    when its p90 is 0 (every token in one read: no streaming rate to speak of)."""
    p90 = summary.tpot_ms.p90
    return None if p90 is None else ratio(1000.0, p90)


class CurvePoint(BaseModel):
    """One measured level of a capacity search or a Pareto curve."""

    level: int
    """Users (closed loop) or requests per second (a capacity search by rate)."""
    count: int
    """Requests measured."""
    availability: float | None
    system_tps: float | None
    """Output tokens per second over all users."""
    tps_per_user: float | None
    ttft_p90_ms: float | None
    ttft_p99_ms: float | None
    tpot_p90_ms: float | None
    e2e_p99_ms: float | None
    goodput: float | None
    passed: bool | None = None
    """Capacity search: whether the level met the SLO."""
    reason: str | None = None
    low_count: bool | None = None
    on_front: bool | None = None
    """Pareto: no other point has at least its system_tps and at least its tps_per_user, one
    of them higher (ordinary dominance)."""


def curve_point(level: int, summary: RunSummary) -> CurvePoint:
    return CurvePoint(
        level=level, count=summary.attempts, availability=summary.availability,
        system_tps=summary.output_tokens_per_second, tps_per_user=tps_per_user(summary),
        ttft_p90_ms=summary.ttft_ms.p90, ttft_p99_ms=summary.ttft_ms.p99,
        tpot_p90_ms=summary.tpot_ms.p90, e2e_p99_ms=summary.e2e_ms.p99,
        goodput=summary.goodput)


class CapacityResult(BaseModel):
    unit: str
    max_passing: int | None
    """The highest level that met the SLO below every failing one; None when the lowest
    level failed."""
    first_failing: int | None
    """The lowest level that failed; None when the highest level tried passed."""
    slo: CapacitySlo
    points: list[CurvePoint]
    """Every level measured, in ascending order."""


def capacity_result(unit: str, slo: CapacitySlo, measured: Sequence[tuple[int, RunSummary]]
                    ) -> CapacityResult:
    """The search's answer from its measured levels (each level once; a level measured again
    keeps its last measurement)."""
    points: dict[int, CurvePoint] = {}
    for level, summary in measured:
        judged = verdict(summary, slo)
        points[level] = curve_point(level, summary).model_copy(update={
            "passed": judged.passed, "reason": judged.reason, "low_count": judged.low_count})
    failing = min((p.level for p in points.values() if not p.passed), default=None)
    passing = [p.level for p in points.values()
               if p.passed and (failing is None or p.level < failing)]
    return CapacityResult(unit=unit, max_passing=max(passing, default=None),
                          first_failing=failing, slo=slo,
                          points=[points[level] for level in sorted(points)])


def pareto_front(points: Sequence[CurvePoint]) -> list[CurvePoint]:
    """`points` with on_front set (a point without both figures is not on it)."""
    out = []
    for point in points:
        x, y = point.tps_per_user, point.system_tps
        on = x is not None and y is not None and not any(
            other is not point and other.tps_per_user is not None
            and other.system_tps is not None and other.tps_per_user >= x
            and other.system_tps >= y and (other.tps_per_user > x or other.system_tps > y)
            for other in points)
        out.append(point.model_copy(update={"on_front": on}))
    return out
