"""One probe execution: an endpoint, a workload and a load profile in; samples and per-stage
and overall summaries out."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.registry import sender_for
from sustain.probes.client.secret_policy import SecretPolicy
from sustain.probes.client.secrets import resolve_secret
from sustain.probes.client.target import Target
from sustain.probes.load.clock import RunClock
from sustain.probes.load.drivers import Prepare, StageContext, run_closed_loop, run_open_loop
from sustain.probes.load.live import LiveStats
from sustain.probes.load.plan import ClosedStage, OpenStage, SingleStage, Stage, stages
from sustain.probes.load.profiles import LoadProfile, SweepProfile
from sustain.probes.load.quiet_gc import quiet_gc
from sustain.probes.measure.sample import Sample
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.measure.summary import RunSummary, combined_health, summarise
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload


class StageResult(BaseModel):
    index: int
    label: str
    summary: RunSummary


class RunReport(RunSummary):
    """The whole run (its summary fields), then each stage on its own."""

    stages: list[StageResult] = Field(default_factory=list)
    stopped: str | None = None
    """Why a sweep stopped escalating before its last level, if it did."""


@dataclass(frozen=True, slots=True)
class RunResult:
    samples: list[Sample]
    summary: RunSummary
    stages: list[StageResult] = field(default_factory=list)
    stopped: str | None = None

    def report(self) -> RunReport:
        return RunReport(**self.summary.model_dump(), stages=self.stages, stopped=self.stopped)


def request_headers(target: Target, secrets: SecretPolicy) -> dict[str, str]:
    """Extra headers plus the bearer token from the secret reference (resolved now, where
    `secrets` allows)."""
    headers = dict(target.headers)
    if target.auth_secret_ref is not None:
        headers["Authorization"] = f"Bearer {resolve_secret(target.auth_secret_ref, secrets)}"
    return headers


def sweep_stop_reason(profile: SweepProfile, summary: RunSummary) -> str | None:
    """Why a sweep must not escalate past a stage with this summary, if it must not."""
    floor, ceiling = profile.min_availability, profile.max_ttft_p99_ms
    if floor is not None and (summary.availability or 0.0) < floor:
        return f"availability {summary.availability} below {floor}"
    p99 = summary.ttft_ms.p99
    if ceiling is not None and p99 is not None and p99 > ceiling:
        return f"TTFT p99 {p99:.1f} ms above {ceiling} ms"
    return None


async def _run_stage(stage: Stage, prepare: Prepare, ctx: StageContext
                     ) -> tuple[list[Sample], float]:
    if ctx.live is not None:
        ctx.live.stage = stage.label
    if isinstance(stage, SingleStage):
        return await run_open_loop([0.0], prepare, ctx, max_in_flight=1)
    if isinstance(stage, OpenStage):
        return await run_open_loop(stage.offsets(), prepare, ctx,
                                   max_in_flight=stage.max_in_flight, warmup_s=stage.warmup_s)
    assert isinstance(stage, ClosedStage)
    return await run_closed_loop(stage.users, prepare, ctx, duration_s=stage.duration_s,
                                 max_requests=stage.max_requests,
                                 think_time_s=stage.think_time_s, warmup_s=stage.warmup_s)


async def execute(
    clients: HttpClients, target: Target, workload: Workload, profile: LoadProfile,
    slo: SloThresholds | None = None, live: LiveStats | None = None,
    on_sample: Callable[[Sample], None] | None = None, *,
    secrets: SecretPolicy | None = None, datasets: DatasetPolicy | None = None,
) -> RunResult:
    """Run the profile against the target, stage by stage. Raises before sending anything when
    the auth reference cannot be resolved or is not allowed by `secrets`
    (SecretUnavailableError) or the dataset or tokenizer cannot be loaded or is not allowed by
    `datasets` (DatasetError, ValueError); both policies allow nothing by default. Endpoint
    failures, egress refusals included (see HttpClients), become classified samples.
    `on_sample` sees each measured sample as it completes (the service buffers them)."""
    headers = request_headers(target, secrets or SecretPolicy())
    prepare = sender_for(target)(clients, target, workload, headers,
                                 datasets or DatasetPolicy())

    with quiet_gc():
        return await _execute(prepare, profile, slo, live, on_sample)


async def _execute(prepare: Prepare, profile: LoadProfile, slo: SloThresholds | None,
                   live: LiveStats | None, on_sample: Callable[[Sample], None] | None
                   ) -> RunResult:
    clock = RunClock.start()
    seqs = itertools.count()
    samples: list[Sample] = []
    results: list[StageResult] = []
    measured_s = 0.0
    stopped = None
    for index, stage in enumerate(stages(profile)):
        ctx = StageContext(clock=clock, seqs=seqs, stage=index, live=live,
                           on_sample=on_sample)
        stage_samples, stage_s = await _run_stage(stage, prepare, ctx)
        summary = summarise(stage_samples, stage_s, slo)
        results.append(StageResult(index=index, label=stage.label, summary=summary))
        samples.extend(stage_samples)
        measured_s += stage_s
        if isinstance(profile, SweepProfile):
            stopped = sweep_stop_reason(profile, summary)
            if stopped is not None:
                break
    overall = summarise(samples, measured_s, slo,
                        combined_health([r.summary.generator for r in results]))
    return RunResult(samples=samples, summary=overall, stages=results, stopped=stopped)
