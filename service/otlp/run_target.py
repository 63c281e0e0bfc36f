"""Which endpoint a run measured, for the OpenTelemetry attributes of its samples.

A replica's executor measures a run, then hands its samples to Metrics.observe_samples by
the endpoint's and probe's names: the API kind and the base URL the GenAI attributes come
from (`gen_ai.operation.name`, `gen_ai.provider.name`, `server.address`) are not among them.
The measurer remembers the run's Target in a context variable of the run's task
(`TargetNoting`, wrapped around the replica's measurer when export is on), and
observe_samples reads it there (`run_target`) in the same task, after the run. Each run is
its own task, so concurrent runs never see each other's target.

No OpenTelemetry import here: this module is loaded whether or not the `otel` extra is.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

from sustain.probes.client.secret_policy import SecretPolicy
from sustain.probes.client.target import Target
from sustain.probes.load.live import LiveStats
from sustain.probes.load.profiles import LoadProfile
from sustain.probes.measure.sample import Sample
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.run_result import RunResult
from sustain.probes.runner import Measurer, RunBudget, RunStop
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload

_RUN_TARGET: ContextVar[Target | None] = ContextVar("sustain_run_target", default=None)


def run_target() -> Target | None:
    """The Target the current task's last run measured through a TargetNoting measurer; None
    when it measured none (or through another measurer)."""
    return _RUN_TARGET.get()


class TargetNoting:
    """A Measurer that measures through `inner` and notes each run's Target in the calling
    task's context first (`run_target`). Everything else is `inner`'s."""

    def __init__(self, inner: Measurer) -> None:
        self.inner = inner

    @property
    def capacity(self) -> int:
        return self.inner.capacity

    async def measure(self, target: Target, workload: Workload, profile: LoadProfile,
                      slo: SloThresholds | None = None, live: LiveStats | None = None,
                      on_sample: Callable[[Sample], None] | None = None,
                      stop: RunStop | None = None, budget: RunBudget | None = None, *,
                      secrets: SecretPolicy | None = None,
                      datasets: DatasetPolicy | None = None) -> RunResult:
        _RUN_TARGET.set(target)
        return await self.inner.measure(target, workload, profile, slo, live, on_sample, stop,
                                        budget, secrets=secrets, datasets=datasets)

    async def aclose(self) -> None:
        await self.inner.aclose()
