"""The final record of a run: status, summary, counts and sketches, written after its samples."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sustain.probes.measure.run_sketches import stage_sketches
from sustain.probes.run_result import RunResult


@dataclass(frozen=True, slots=True)
class RunCounts:
    """What windowed availability and throughputs are summed from."""

    attempts: int
    successes: int
    good: int | None
    output_tokens: int
    measured_s: float
    quality_checked: int | None = None
    quality_passed: int | None = None
    capacity: int | None = None
    """A capacity search's highest passing level; None for other profiles or none passing."""
    capacity_tps: float | None = None


@dataclass(frozen=True, slots=True)
class RunFinal:
    """The end of a run: written after its samples, in one transaction with its sketches."""

    run_id: int
    probe_id: int
    scheduled_for: datetime
    status: str
    error: str | None = None
    summary: dict[str, Any] | None = None
    counts: RunCounts | None = None
    sketches: Mapping[tuple[int, str], bytes] = field(default_factory=dict)
    """Serialised MetricSketch by (stage, metric)."""
    samples_dropped: int = 0
    server_series: Mapping[str, Sequence[tuple[float, float]]] = field(default_factory=dict)
    """The server's own series scraped during the run: (unix seconds, value) points."""


def run_status(result: RunResult) -> str:
    """A run succeeded when at least one request did; its availability tells the rest."""
    return "succeeded" if result.summary.successes > 0 else "failed"


def capacity_tps(result: RunResult) -> float | None:
    """Output tokens per second at a capacity search's highest passing level."""
    found = result.capacity
    if found is None or found.max_passing is None:
        return None
    return next((p.system_tps for p in found.points if p.level == found.max_passing), None)


def completed(base: RunFinal, result: RunResult) -> RunFinal:
    """The final record of a run that ran to its end: status, summary, counts, and the
    serialised sketch of each metric of each stage. CPU-heavy for big runs (every ITL gap is
    binned): the executor calls it in a thread."""
    summary = result.summary
    return replace(
        base,
        status=run_status(result),
        summary=result.report().model_dump(mode="json"),
        counts=RunCounts(attempts=summary.attempts, successes=summary.successes,
                         good=summary.good, output_tokens=summary.output_tokens,
                         measured_s=summary.duration_s,
                         quality_checked=None if summary.quality is None
                         else summary.quality.checked,
                         quality_passed=None if summary.quality is None
                         else summary.quality.passed,
                         capacity=None if result.capacity is None
                         else result.capacity.max_passing,
                         capacity_tps=capacity_tps(result)),
        sketches={key: sketch.to_bytes()
                  for key, sketch in stage_sketches(result.samples).items()},
        server_series=result.server_series,
    )
