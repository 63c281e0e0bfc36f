"""One probe execution: an endpoint, a workload and a load profile in; samples and per-stage
and overall summaries out (a RunResult, sustain.probes.run_result)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, TypeVar

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.secret_policy import SecretPolicy
from sustain.probes.client.secrets import resolve_secret
from sustain.probes.client.target import Target
from sustain.probes.client.trace_context import HEADER as TRACE_HEADER
from sustain.probes.load.calibrate import SizedPrompts
from sustain.probes.load.clock import RunClock
from sustain.probes.load.drivers import (
    Prepare,
    Request,
    StageContext,
    measured_seconds,
    run_closed_loop,
    run_open_loop,
)
from sustain.probes.load.live import LiveStats
from sustain.probes.load.plan import StagePlan, sessions_problem
from sustain.probes.load.profiles import (
    CapacityProfile,
    LoadProfile,
    ParetoProfile,
    TraceProfile,
)
from sustain.probes.load.quiet_gc import quiet_gc
from sustain.probes.load.rag import PgVectorStore, RagPipeline
from sustain.probes.load.senders import any_transport, fresh_connections, sender_for
from sustain.probes.load.sessions import run_sessions
from sustain.probes.load.stages import ClosedStage, OpenStage, SingleStage, Stage
from sustain.probes.measure.capacity import (
    capacity_result,
    curve_point,
    pareto_front,
)
from sustain.probes.measure.prompt_tokens import PromptCalibration
from sustain.probes.measure.sample import Sample
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.measure.steady import steady_state
from sustain.probes.measure.summary import RunSummary, combined_health, summarise
from sustain.probes.protocols.registry import auth_headers, is_conversation, protocol_headers
from sustain.probes.run_result import RunResult, StageResult
from sustain.probes.telemetry.watch import Telemetry, watch_server
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.sessions import Dialogue, Sessions, sessions_of
from sustain.probes.workload.spec import Workload, WorkloadError
from sustain.probes.workload.traces import Replay, load_replay

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RunBudget:
    """Hard bounds on one run, whatever its profile plans: the run stops `seconds` after it
    began, or once it has started `requests` requests, and its closed-loop stages send at
    most `max_rate` requests/s however many users they have. (Closed-loop users send as fast
    as the endpoint answers, so no plan can bound their request count or rate.)"""

    seconds: float
    requests: int
    max_rate: float | None = None
    """Requests/s a closed-loop stage may send in all (users wait their turn); None: as fast
    as the endpoint answers."""


class RunStop:
    """Ends a run early, from outside (a cancel) or from its own budget. The stage in progress
    is cancelled, with its requests in flight, and the samples measured so far are the
    run's result; the first reason given is kept as `RunResult.stopped`."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._event = asyncio.Event()

    def set(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self._event.set()

    @property
    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()


def budgeted(prepare: Prepare, requests: int, stop: RunStop) -> Prepare:
    """`prepare` that sets `stop` when it builds the run's last allowed request."""
    def counted(seq: int, dialogue: Dialogue | None = None) -> Request:
        if seq + 1 >= requests:
            stop.set(f"stopped at the limit of {requests} requests per run")
        return prepare(seq, dialogue)
    return counted


async def unless_stopped(work: Coroutine[Any, Any, T], stop: RunStop) -> T | None:
    """The result of `work`, or None once `stop` is set first (`work` is then cancelled and
    waited for)."""
    if stop.is_set:
        work.close()
        return None
    task = asyncio.create_task(work)
    waiter = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, waiter, return_exceptions=True)
    return None if task.cancelled() else task.result()


def request_headers(target: Target, secrets: SecretPolicy) -> dict[str, str]:
    """Extra headers, those the target's protocol always sends (Anthropic's version) and the
    key from the secret reference (resolved now, where `secrets` allows) as the protocol
    carries it: a bearer token, or Anthropic's `x-api-key`. A traceparent among the target's
    headers is left out: each request carries one of its own (client/trace_context.py)."""
    headers = {name: value for name, value in {**protocol_headers(target),
                                               **target.headers}.items()
               if name.lower() != TRACE_HEADER}
    if target.auth_secret_ref is not None:
        headers.update(auth_headers(target, resolve_secret(target.auth_secret_ref, secrets)))
    return headers


def prepare_requests(clients: HttpClients, target: Target, workload: Workload,
                     secrets: SecretPolicy, datasets: DatasetPolicy,
                     replay: Replay | None = None) -> Prepare:
    """What builds each request of a run: the bearer token resolved (SecretUnavailableError),
    the dataset and tokenizer loaded (DatasetError, ValueError); WorkloadError for sessions
    to anything but a chat endpoint."""
    if workload.in_sessions and not is_conversation(target.api_kind):
        raise WorkloadError("sessions need a chat endpoint (api_kind openai-chat, "
                            "openai-responses or anthropic-messages): a conversation's "
                            "history is a list of messages")
    if workload.rag is not None or target.rag is not None:
        ref = None if workload.rag is None else workload.rag.pgvector_dsn_ref
        store = None if ref is None else PgVectorStore(resolve_secret(ref, secrets),
                                                       clients.egress)
        return RagPipeline(any_transport(clients, fresh=fresh_connections(workload)), target,
                           workload, partial(request_headers, secrets=secrets), datasets, store)
    return sender_for(target)(clients, target, workload, request_headers(target, secrets),
                              datasets, replay)


async def ready(prepare: Prepare, calibration: PromptCalibration | None = None
                ) -> PromptCalibration | None:
    """What a run's requests need before the first is sent: a RAG probe's corpus, embedded
    (RagIndexError when it cannot be); synthetic prompts sized in the server's tokens (by
    `calibration` when the run has it already: another worker's), and how (None for
    prompts of given text)."""
    if isinstance(prepare, RagPipeline):
        await prepare.index()
    if isinstance(prepare, SizedPrompts):
        return await prepare.calibrate(calibration)
    return None


async def finish(prepare: Prepare) -> None:
    """What a run leaves behind, cleared after its last request: a RAG probe's pgvector
    table."""
    if isinstance(prepare, RagPipeline):
        await prepare.close()


def server_watch(target: Target, egress: EgressPolicy
                 ) -> contextlib.AbstractAsyncContextManager[Telemetry | None]:
    """The scraping of the target's metrics_url for the length of a run (nothing without
    one): in its own process, never on the loop that times requests."""
    gpus = () if target.deployment is None else tuple(target.deployment.gpus)
    return watch_server(target.metrics_url, target.metrics_interval_s, target.metrics_names,
                        egress, target.tls_verify, gpus)


def replay_of(profile: LoadProfile, workload: Workload, datasets: DatasetPolicy
              ) -> Replay | None:
    """A trace profile's trace, loaded where `datasets` allows (DatasetError otherwise), with
    the run's salt; None for other profiles."""
    if not isinstance(profile, TraceProfile):
        return None
    return load_replay(profile.path, profile.format, datasets, workload.cache)


def inputs_of(profile: LoadProfile, workload: Workload, datasets: DatasetPolicy
              ) -> tuple[Replay | None, Sessions | None]:
    """What a run reads before it starts: a trace profile's trace and a sessions workload's
    conversations (DatasetError where `datasets` refuses them; ValueError for a sessions
    workload under a profile that cannot play it)."""
    sessions = sessions_of(workload, datasets)
    if sessions is not None and (problem := sessions_problem(profile)) is not None:
        raise WorkloadError(problem)
    return replay_of(profile, workload, datasets), sessions


async def run_stage(stage: Stage, prepare: Prepare, ctx: StageContext, *,
                    offsets: Iterable[float] | None = None, origin_ns: int | None = None,
                    sessions: Sessions | None = None, shard: tuple[int, int] = (0, 1)
                    ) -> tuple[list[Sample], float]:
    """Drive one stage: its measured samples and measured seconds. A worker running a shard
    of an open-loop stage passes its share of the `offsets` and the stage's common
    `origin_ns` (perf_counter_ns); a closed-loop stage starts when this is called. With
    `sessions`, users play conversations (shard (index, count) plays every count-th)."""
    if ctx.live is not None:
        ctx.live.stage = stage.label
    if sessions is not None:
        return await play_sessions(stage, prepare, ctx, sessions, shard)
    if isinstance(stage, SingleStage):
        return await run_open_loop([0.0], prepare, ctx, max_in_flight=1, origin_ns=origin_ns)
    if isinstance(stage, OpenStage):
        return await run_open_loop(stage.offsets() if offsets is None else offsets, prepare,
                                   ctx, max_in_flight=stage.max_in_flight,
                                   warmup_s=stage.warmup_s, origin_ns=origin_ns)
    assert isinstance(stage, ClosedStage)
    return await run_closed_loop(stage.users, prepare, ctx, duration_s=stage.duration_s,
                                 max_requests=stage.max_requests,
                                 think_time_s=stage.think_time_s, warmup_s=stage.warmup_s,
                                 min_requests=stage.min_requests)


async def play_sessions(stage: Stage, prepare: Prepare, ctx: StageContext, sessions: Sessions,
                        shard: tuple[int, int]) -> tuple[list[Sample], float]:
    """A stage of a sessions run: a single stage plays one conversation, a closed-loop one
    `users` at a time."""
    conversations = sessions.stream(*shard)
    if isinstance(stage, SingleStage):
        first = next(conversations, None)
        conversations = iter(() if first is None else (first,))
        return await run_sessions(1, conversations, prepare, ctx, duration_s=None,
                                  max_requests=None, allow_cache=sessions.allow_cache,
                                  header=sessions.header)
    if not isinstance(stage, ClosedStage):
        raise ValueError("sessions run under closed-loop stages only")
    return await run_sessions(stage.users, conversations, prepare, ctx,
                              duration_s=stage.duration_s, max_requests=stage.max_requests,
                              warmup_s=stage.warmup_s, allow_cache=sessions.allow_cache,
                              header=sessions.header)


async def execute(
    clients: HttpClients, target: Target, workload: Workload, profile: LoadProfile,
    slo: SloThresholds | None = None, live: LiveStats | None = None,
    on_sample: Callable[[Sample], None] | None = None, stop: RunStop | None = None,
    budget: RunBudget | None = None, *,
    secrets: SecretPolicy | None = None, datasets: DatasetPolicy | None = None,
) -> RunResult:
    """Run the profile against the target, stage by stage. Raises before sending anything when
    the auth reference cannot be resolved or is not allowed by `secrets`
    (SecretUnavailableError) or the dataset or tokenizer cannot be loaded or is not allowed by
    `datasets` (DatasetError, ValueError); both policies allow nothing by default. Endpoint
    failures, egress refusals included (see HttpClients), become classified samples.
    `on_sample` sees each measured sample as it completes (the service buffers them). Setting
    `stop`, or reaching `budget`, ends the run early with what was measured so far."""
    # the run's media are weighed against its peak requests in flight (workload/media.py)
    datasets = (datasets or DatasetPolicy()).for_run(profile.peak_in_flight())
    replay, sessions = await asyncio.to_thread(inputs_of, profile, workload, datasets)
    prepared = prepare_requests(clients, target, workload, secrets or SecretPolicy(),
                                datasets, replay)
    calibration = await ready(prepared)
    stop = stop if stop is not None else RunStop()
    prepare = prepared if budget is None else budgeted(prepared, budget.requests, stop)
    try:
        async with server_watch(target, clients.egress) as telemetry:
            # The time budget starts after the server's baseline scrape, as the run does.
            timer = None if budget is None else asyncio.get_running_loop().call_later(
                budget.seconds, stop.set,
                f"stopped at the limit of {budget.seconds:g} s per run")
            try:
                with quiet_gc():
                    result = await _execute(prepare, profile, slo, live, on_sample, stop,
                                            replay, sessions,
                                            None if budget is None else budget.max_rate)
            finally:
                if timer is not None:
                    timer.cancel()
    finally:
        await finish(prepared)
    return result.with_telemetry(telemetry).with_efficiency(target.deployment) \
        .with_prompt_calibration(calibration)


def stopped_stage(samples: list[Sample]) -> tuple[list[Sample], float]:
    """The samples a stage measured before it was stopped, in request order, and its
    measured time: from the first measured request's intended (else actual) send to the end
    of the last response."""
    ordered = sorted(samples, key=lambda s: s.seq)
    start = min((s.t_sched_ms if s.t_sched_ms is not None else s.t_send_ms for s in ordered),
                default=0.0)
    return ordered, measured_seconds(ordered, start)


def summarise_stage(samples: list[Sample], seconds: float, slo: SloThresholds | None,
                    *, steady_only: bool) -> RunSummary:
    """A stage's summary with its steady state; with `steady_only` (the points of a capacity
    search or a Pareto curve) over its steady part when it settled after a while."""
    judged = steady_state(samples)
    if steady_only and judged.start_ms is not None:
        samples, seconds = judged.samples, measured_seconds(judged.samples, judged.start_ms)
    return summarise(samples, seconds, slo).model_copy(update={"steady_state": judged.state})


@dataclass(slots=True)
class RunBook:
    """What a run has measured so far, stage by stage, and what it is: kept alike by the
    in-process runner (`_execute`) and the conductor of worker processes. The plan picks
    each next stage from the summaries so far; the result adds the run's summary over every
    sample and, for a capacity search or a Pareto profile, its curve."""

    profile: LoadProfile
    replay: Replay | None = None
    samples: list[Sample] = field(default_factory=list)
    results: list[StageResult] = field(default_factory=list)
    measured_s: float = 0.0
    stopped: str | None = None
    plan: StagePlan = field(init=False)

    def __post_init__(self) -> None:
        self.plan = StagePlan(self.profile, self.replay)

    @property
    def steady_only(self) -> bool:
        """Whether stage figures are taken over each stage's steady part."""
        return isinstance(self.profile, CapacityProfile | ParetoProfile)

    def next_stage(self) -> Stage | None:
        stage = self.plan.next([r.summary for r in self.results])
        if stage is None and self.stopped is None:
            self.stopped = self.plan.stopped
        return stage

    def record(self, stage: Stage, samples: list[Sample], seconds: float,
               summary: RunSummary) -> None:
        self.results.append(StageResult(index=len(self.results), label=stage.label,
                                        summary=summary))
        self.samples.extend(samples)
        self.measured_s += seconds

    def overall(self, slo: SloThresholds | None) -> RunSummary:
        """The run's summary over every sample (CPU-bound for big runs)."""
        return summarise(self.samples, self.measured_s, slo,
                         combined_health([r.summary.generator for r in self.results]))

    def result(self, summary: RunSummary) -> RunResult:
        levels = self.plan.levels
        measured = [(level, r.summary) for level, r in zip(levels, self.results, strict=False)]
        capacity = pareto = None
        if isinstance(self.profile, CapacityProfile):
            capacity = capacity_result(self.profile.unit, self.profile.slo, measured)
        elif isinstance(self.profile, ParetoProfile):
            pareto = pareto_front([curve_point(level, summary) for level, summary in measured])
        return RunResult(samples=self.samples, summary=summary, stages=self.results,
                         stopped=self.stopped, capacity=capacity, pareto=pareto)


async def _execute(prepare: Prepare, profile: LoadProfile, slo: SloThresholds | None,
                   live: LiveStats | None, on_sample: Callable[[Sample], None] | None,
                   stop: RunStop, replay: Replay | None = None,
                   sessions: Sessions | None = None, max_rate: float | None = None
                   ) -> RunResult:
    clock = RunClock.start()
    seqs = itertools.count()
    book = RunBook(profile, replay)
    while (stage := book.next_stage()) is not None:
        so_far: list[Sample] = []

        def measured(sample: Sample, so_far: list[Sample] = so_far) -> None:
            so_far.append(sample)
            if on_sample is not None:
                on_sample(sample)

        ctx = StageContext(clock=clock, seqs=seqs, stage=len(book.results), live=live,
                           on_sample=measured, max_rate=max_rate)
        outcome = await unless_stopped(run_stage(stage, prepare, ctx, sessions=sessions),
                                       stop)
        stage_samples, stage_s = stopped_stage(so_far) if outcome is None else outcome
        book.record(stage, stage_samples, stage_s, summarise_stage(
            stage_samples, stage_s, slo, steady_only=book.steady_only))
        if outcome is None:
            book.stopped = stop.reason
            break
    return book.result(book.overall(slo))


class TooManyWorkersError(ValueError):
    """A run asks for more measurement worker processes than there are."""


class Measurer(Protocol):
    """Where runs are measured: in worker processes (workers.pool.WorkerPool) or on the
    caller's own event loop (InProcess). Both take what `execute` takes."""

    @property
    def capacity(self) -> int:
        """The most worker processes one run may use."""
        ...

    async def measure(self, target: Target, workload: Workload, profile: LoadProfile,
                      slo: SloThresholds | None = None, live: LiveStats | None = None,
                      on_sample: Callable[[Sample], None] | None = None,
                      stop: RunStop | None = None, budget: RunBudget | None = None, *,
                      secrets: SecretPolicy | None = None,
                      datasets: DatasetPolicy | None = None) -> RunResult: ...

    async def aclose(self) -> None: ...


class InProcess:
    """Measures on the caller's event loop, with its clients: what the caller's loop does
    besides (serving an API) can delay requests. For tools and debugging."""

    capacity = 1

    def __init__(self, clients: HttpClients) -> None:
        self.clients = clients

    async def measure(self, target: Target, workload: Workload, profile: LoadProfile,
                      slo: SloThresholds | None = None, live: LiveStats | None = None,
                      on_sample: Callable[[Sample], None] | None = None,
                      stop: RunStop | None = None, budget: RunBudget | None = None, *,
                      secrets: SecretPolicy | None = None,
                      datasets: DatasetPolicy | None = None) -> RunResult:
        if profile.workers > 1:
            raise TooManyWorkersError(f"the run asks for {profile.workers} worker processes; "
                                      "runs measure in-process here (SUSTAIN_MEASURE_WORKERS=0)")
        return await execute(self.clients, target, workload, profile, slo, live, on_sample,
                             stop, budget, secrets=secrets, datasets=datasets)

    async def aclose(self) -> None:
        """The clients are the caller's to close."""
