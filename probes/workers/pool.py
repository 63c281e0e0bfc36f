"""Worker processes, started when first needed and replaced when one dies, and each run's
conversation with one of them.

A pool of `size` workers serves every run of a program (the service, `sustain probe`): a run
of `workers: N` gets N distinct workers, the least busy first, and any number of runs may
share one. A worker that exits fails the runs it was measuring at once, with its exit status
in the error (the samples it had sent stay theirs), and a new one takes its place.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import os
import pickle
from collections.abc import Callable
from pathlib import Path

from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.secret_policy import SecretPolicy
from sustain.probes.client.target import Target
from sustain.probes.load.calibrate import FITS, calibration_key, known_fit
from sustain.probes.load.live import LiveStats
from sustain.probes.load.profiles import LoadProfile
from sustain.probes.measure.prompt_tokens import PromptCalibration
from sustain.probes.measure.sample import Sample
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.run_result import RunResult
from sustain.probes.runner import RunBudget, RunStop, TooManyWorkersError, inputs_of, server_watch
from sustain.probes.workers.conductor import conduct
from sustain.probes.workers.process import RunChannel, WorkerDiedError, WorkerProcess
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.requests import fitted
from sustain.probes.workload.sessions import Sessions
from sustain.probes.workload.spec import Workload
from sustain.probes.workload.traces import Replay

logger = logging.getLogger(__name__)

CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
"""cgroup v2: the CPU quota of this process's group (a Kubernetes CPU limit), `max` or
`QUOTA PERIOD` in microseconds."""


def available_cpus(cpu_max: Path = CPU_MAX) -> int:
    """CPUs this process may use: its affinity mask (a container's cpuset counts), lowered
    to its cgroup's CPU quota rounded up (a pod limited to 1.5 CPUs gets 2)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    try:
        quota, period = cpu_max.read_text().split()[:2]
    except (OSError, ValueError):
        return cpus
    if quota == "max" or not quota.isdigit() or not period.isdigit() or int(period) == 0:
        return cpus
    return max(1, min(cpus, math.ceil(int(quota) / int(period))))


class WorkerPool:
    """Up to `size` worker processes, started on first use; runs measure in them."""

    def __init__(self, size: int, *, max_connections: int = 1000,
                 egress: EgressPolicy | None = None) -> None:
        if size < 1:
            raise ValueError("a worker pool needs at least one worker")
        self.size = size
        self.egress = egress or EgressPolicy()
        self._config = {"max_connections": max_connections, "egress": pickle.dumps(self.egress)}
        self._workers: list[WorkerProcess] = []
        self._starting = 0
        self._lock = asyncio.Lock()
        self._keys = itertools.count(1)
        self._closing = False
        self.replaced = 0
        """Workers started in place of one that died."""

    @property
    def capacity(self) -> int:
        """The most workers one run may use."""
        return self.size

    @property
    def pids(self) -> list[int]:
        return [worker.pid for worker in self._workers]

    def _exited(self, worker: WorkerProcess) -> None:
        if worker in self._workers:
            self._workers.remove(worker)
            if not self._closing:
                logger.error("%s; its runs failed, a new worker will take its place",
                             worker.dead)
                self.replaced += 1
                asyncio.get_running_loop().create_task(self._replace())

    async def _replace(self) -> None:
        try:
            async with self._lock:
                if not self._closing and len(self._workers) < self.size:
                    self._workers.append(await WorkerProcess.start(self._config,
                                                                   self._exited))
        except Exception:
            logger.exception("cannot start a measurement worker")

    async def lease(self, count: int) -> list[WorkerProcess]:
        """`count` distinct workers for a run: idle ones first, then new ones while the pool
        is not full, then the least busy."""
        if count > self.size:
            raise TooManyWorkersError(
                f"the run asks for {count} workers; at most {self.size} "
                "(SUSTAIN_MEASURE_WORKERS)")
        async with self._lock:
            alive = [w for w in self._workers if w.dead is None]
            chosen = sorted((w for w in alive if w.load == 0), key=lambda w: w.pid)[:count]
            wanted = min(count - len(chosen), self.size - len(alive))
            if wanted > 0:
                outcomes = await asyncio.gather(
                    *(WorkerProcess.start(self._config, self._exited) for _ in range(wanted)),
                    return_exceptions=True)
                started = [o for o in outcomes if isinstance(o, WorkerProcess)]
                self._workers.extend(started)
                chosen.extend(started)
                for outcome in outcomes:
                    if isinstance(outcome, BaseException):
                        raise outcome
            if len(chosen) < count:
                busy = sorted((w for w in self._workers if w not in chosen and w.dead is None),
                              key=lambda w: w.load)
                chosen.extend(busy[:count - len(chosen)])
            if len(chosen) < count:
                raise WorkerDiedError("measurement workers exited while the run was starting")
            return chosen

    async def measure(self, target: Target, workload: Workload, profile: LoadProfile,
                      slo: SloThresholds | None = None, live: LiveStats | None = None,
                      on_sample: Callable[[Sample], None] | None = None,
                      stop: RunStop | None = None, budget: RunBudget | None = None, *,
                      secrets: SecretPolicy | None = None,
                      datasets: DatasetPolicy | None = None) -> RunResult:
        """What runner.execute does, measured in `profile.workers` worker processes."""
        # each worker holds its own decoded media; the run's requests in flight their copies
        datasets = (datasets or DatasetPolicy()).for_run(profile.peak_in_flight(),
                                                         profile.workers)
        replay, sessions = await asyncio.to_thread(inputs_of, profile, workload, datasets)
        workers = await self.lease(profile.workers)
        channels = [worker.channel(next(self._keys)) for worker in workers]
        try:
            calibration = await self.open(channels, target, workload,
                                          secrets or SecretPolicy(), datasets, replay, sessions)
            async with server_watch(target, self.egress) as telemetry:
                result = await conduct(channels, profile, slo, live, on_sample,
                                       stop if stop is not None else RunStop(), budget, replay)
            return result.with_telemetry(telemetry).with_efficiency(target.deployment) \
                .with_prompt_calibration(calibration)
        finally:
            for channel in channels:
                channel.stop("the run ended")
                channel.close()

    @staticmethod
    async def open(channels: list[RunChannel], target: Target, workload: Workload,
                   secrets: SecretPolicy, datasets: DatasetPolicy, replay: Replay | None,
                   sessions: Sessions | None) -> PromptCalibration | None:
        """Open the run on every worker; how its synthetic prompts are sized. Prompts to be
        fitted to the server's count that this process holds no fit for are fitted by the
        first worker alone, then every other worker opens with its fit (the calibration
        requests go out once, not once per worker)."""
        calibration = known_fit(target, workload)
        first: list[PromptCalibration | None] = []
        rest = channels
        if calibration is None and len(channels) > 1 and fitted(workload, target.api_kind):
            calibration = await channels[0].open(target, workload, secrets, datasets, replay,
                                                 sessions)
            first, rest = [calibration], channels[1:]
        opened = await asyncio.gather(
            *(channel.open(target, workload, secrets, datasets, replay, sessions, calibration)
              for channel in rest),
            return_exceptions=True)
        for outcome in opened:
            if isinstance(outcome, BaseException):
                raise outcome
        run = next((c for c in [*first, *opened] if isinstance(c, PromptCalibration)), None)
        if run is not None and not run.reused:
            FITS.put(calibration_key(target, workload), run)
        return run

    async def aclose(self) -> None:
        self._closing = True
        async with self._lock:
            workers, self._workers = list(self._workers), []
        await asyncio.gather(*(worker.close() for worker in workers))

    async def __aenter__(self) -> WorkerPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
