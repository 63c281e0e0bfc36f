"""What one run produced: its samples and summaries (RunResult), and the report of it that
is stored and served (RunReport: the whole run's summary, then each stage's)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pydantic import BaseModel, Field

from sustain.probes.measure.capacity import CapacityResult, CurvePoint
from sustain.probes.measure.deployment import Deployment
from sustain.probes.measure.efficiency import efficiency
from sustain.probes.measure.prompt_tokens import PromptCalibration
from sustain.probes.measure.sample import Sample
from sustain.probes.measure.server_metrics import Point, ScrapeCounts, summarise_series
from sustain.probes.measure.summary import RunSummary
from sustain.probes.telemetry.families import is_counter
from sustain.probes.telemetry.watch import Telemetry


class StageResult(BaseModel):
    index: int
    label: str
    summary: RunSummary


class RunReport(RunSummary):
    """The whole run (its summary fields), then each stage on its own."""

    stages: list[StageResult] = Field(default_factory=list)
    stopped: str | None = None
    """Why the run ended before its plan did, if it did: a sweep that stopped escalating, a
    cancel, or the run's budget."""
    capacity: CapacityResult | None = None
    """A capacity search's answer: the highest level that met the SLO, and every point."""
    pareto: list[CurvePoint] | None = None
    """A Pareto profile's points (system_tps against tps_per_user), with `on_front`."""


@dataclass(frozen=True, slots=True)
class RunResult:
    samples: list[Sample]
    summary: RunSummary
    stages: list[StageResult] = field(default_factory=list)
    stopped: str | None = None
    server_series: dict[str, list[Point]] = field(default_factory=dict)
    """The server's series as scraped during the run: (unix seconds, value) points."""
    capacity: CapacityResult | None = None
    pareto: list[CurvePoint] | None = None

    def with_efficiency(self, deployment: Deployment | None) -> RunResult:
        """This result with what its throughput costs under `deployment`."""
        if deployment is None:
            return self
        return replace(self, summary=self.summary.model_copy(update={
            "efficiency": efficiency(self.summary, deployment)}))

    def with_telemetry(self, telemetry: Telemetry | None) -> RunResult:
        """This result with what the server's metrics said during the run."""
        if telemetry is None:
            return self
        summary = self.summary.model_copy(update={
            "server_metrics": summarise_series(telemetry.series, is_counter),
            "server_scrapes": ScrapeCounts(scrapes=telemetry.scrapes,
                                           failures=dict(telemetry.failures))})
        return replace(self, summary=summary, server_series=telemetry.series)

    def with_prompt_calibration(self, calibration: PromptCalibration | None) -> RunResult:
        """This result with how its synthetic prompts were sized (the run's summary only)."""
        if calibration is None:
            return self
        return replace(self, summary=self.summary.model_copy(update={
            "prompt_calibration": calibration}))

    def report(self) -> RunReport:
        return RunReport(**self.summary.model_dump(), stages=self.stages, stopped=self.stopped,
                         capacity=self.capacity, pareto=self.pareto)
