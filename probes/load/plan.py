"""A run's stages, one at a time: a profile lists its own (`LoadProfile.planned_stages`); a
sweep stops after a level that breaks its stop condition and a capacity search picks each
level from the verdicts so far (no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sustain.probes.load.profiles import CapacityProfile, LoadProfile, SweepProfile
from sustain.probes.load.search import next_level
from sustain.probes.load.stages import ClosedStage, Stage
from sustain.probes.measure.capacity import verdict
from sustain.probes.measure.summary import RunSummary
from sustain.probes.workload.traces import Replay

SESSIONS_PROBLEM = ("sessions run under a concurrency, sweep, pareto, capacity by concurrency, "
                    "single or all-concurrency steps profile: its users are the conversations "
                    "in flight")


def sessions_problem(profile: LoadProfile) -> str | None:
    """Why a sessions workload cannot run under `profile`, or None (see
    `LoadProfile.plays_sessions`)."""
    return None if profile.plays_sessions() else SESSIONS_PROBLEM


def sweep_stop_reason(profile: SweepProfile, summary: RunSummary) -> str | None:
    """Why a sweep must not escalate past a stage with this summary, if it must not."""
    floor, ceiling = profile.min_availability, profile.max_ttft_p99_ms
    if floor is not None and (summary.availability or 0.0) < floor:
        return f"availability {summary.availability} below {floor}"
    p99 = summary.ttft_ms.p99
    if ceiling is not None and p99 is not None and p99 > ceiling:
        return f"TTFT p99 {p99:.1f} ms above {ceiling} ms"
    return None


@dataclass(slots=True)
class StagePlan:
    """The stages of a run, one at a time, each decided from the summaries of those before:
    a fixed profile lists its stages; a sweep stops after a level that breaks its stop
    condition (`stopped` says why); a capacity search picks each level from the verdicts so
    far, until capacity is known to the integer."""

    profile: LoadProfile
    replay: Replay | None = None
    stopped: str | None = None
    levels: list[int] = field(default_factory=list)
    """The load level of each stage planned (users, or requests per second)."""
    _fixed: list[Stage] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.profile, CapacityProfile):
            self._fixed = self.profile.planned_stages(self.replay)

    def next(self, done: Sequence[RunSummary]) -> Stage | None:
        """The stage after the `done` ones (their summaries, in order), or None."""
        profile = self.profile
        if isinstance(profile, SweepProfile) and done:
            self.stopped = sweep_stop_reason(profile, done[-1])
            if self.stopped is not None:
                return None
        if self._fixed is not None:
            if len(done) >= len(self._fixed):
                return None
            stage = self._fixed[len(done)]
            self.levels.append(stage.users if isinstance(stage, ClosedStage) else 0)
            return stage
        assert isinstance(profile, CapacityProfile)
        verdicts = {level: verdict(summary, profile.slo).passed
                    for level, summary in zip(self.levels, done, strict=False)}
        level = next_level(verdicts, profile.minimum, profile.maximum)
        if level is None:
            return None
        self.levels.append(level)
        return profile.level_stage(level)
