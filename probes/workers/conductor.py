"""Driving one run over worker processes, stage by stage, as runner.execute does in-process.

For each stage the conductor splits it into shards (one per worker), gives every shard the
same start a few milliseconds ahead, collects the samples as they stream back, and waits for
every shard to finish (or stops them all: a cancel, the run's time budget, a shard that
reached its share of the request budget). The stage's samples are the union of the shards',
its measured time runs from the common start (after warmup) to the last response, and its
summary, the sweep's decision to go on, and the run's summary are computed here, over all the
samples, as one process would: percentiles are exact, never merged estimates. This is the
parent's work, off the workers' loops; it runs in a thread so a service's loop stays free.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from sustain.probes.load.clock import RunClock
from sustain.probes.load.drivers import measured_seconds
from sustain.probes.load.live import LiveStats
from sustain.probes.load.profiles import LoadProfile
from sustain.probes.load.stages import ClosedStage, Stage
from sustain.probes.measure.sample import Sample
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.run_result import RunResult
from sustain.probes.runner import RunBook, RunBudget, RunStop, stopped_stage, summarise_stage
from sustain.probes.workers.process import RunChannel, StageDone
from sustain.probes.workers.shards import Shard, next_base, shard_stage, split_count
from sustain.probes.workload.traces import Replay

START_LEAD_NS = 20_000_000
"""Each stage starts this long after its shards are sent, so every worker holds its shard
before the first intended send (the lead is not part of the run's measured time)."""


def stage_start_ms(stage: Stage, samples: list[Sample], start_ms: float) -> float:
    """Where a finished stage's measured time begins: the end of its warmup for an open loop
    (from the common start), the first counted send for a closed loop (users are still busy
    with warmup requests when the warmup ends)."""
    if isinstance(stage, ClosedStage):
        return min((s.t_send_ms for s in samples), default=start_ms)
    return start_ms + getattr(stage, "warmup_s", 0.0) * 1000.0


def request_shares(budget: RunBudget | None, sent: int, shards: list[Shard]
                   ) -> list[int | None]:
    """How many requests each shard may still send under the run's request budget: the rest
    of it divided among the shards that send in this stage (the others get none)."""
    if budget is None:
        return [None] * len(shards)
    active = [index for index, shard in enumerate(shards) if shard.stage is not None]
    shares: list[int | None] = [0] * len(shards)
    for index, share in zip(active, split_count(max(0, budget.requests - sent),
                                                max(1, len(active))), strict=False):
        shares[index] = share
    return shares


def rate_share(budget: RunBudget | None, shards: list[Shard]) -> float | None:
    """The requests/s each shard of a closed-loop stage may send: the run's max_rate divided
    evenly among the shards that send in this stage (None: unpaced)."""
    if budget is None or budget.max_rate is None:
        return None
    return budget.max_rate / max(1, sum(1 for shard in shards if shard.stage is not None))


async def conduct(channels: list[RunChannel], profile: LoadProfile, slo: SloThresholds | None,
                  live: LiveStats | None, on_sample: Callable[[Sample], None] | None,
                  stop: RunStop, budget: RunBudget | None, replay: Replay | None = None
                  ) -> RunResult:
    """Run `profile` over the opened `channels` (one per worker); a trace profile's arrivals
    come from its loaded `replay`."""
    clock = RunClock.start()
    timer = None
    if budget is not None:
        timer = asyncio.get_running_loop().call_later(
            budget.seconds, stop.set, f"stopped at the limit of {budget.seconds:g} s per run")
    limit_reason = "" if budget is None else \
        f"stopped at the limit of {budget.requests} requests per run"
    book = RunBook(profile, replay)
    seq, sent = 0, 0
    try:
        while (stage := book.next_stage()) is not None:
            index = len(book.results)
            if live is not None:
                live.stage = stage.label
            collected: list[Sample] = []

            def measured(sample: Sample, collected: list[Sample] = collected) -> None:
                collected.append(sample)
                if live is not None:
                    live.on_send()
                    live.on_done(sample.measurement)
                if on_sample is not None:
                    on_sample(sample)

            for channel in channels:
                channel.clock = clock
                channel.on_sample = measured
            start_ns = time.perf_counter_ns() + START_LEAD_NS
            shards = shard_stage(stage, len(channels))
            done = await run_shards(channels, shards, index, seq, start_ns,
                                    request_shares(budget, sent, shards), limit_reason, stop,
                                    rate_share(budget, shards))
            seq = next_base(seq, len(channels), [d.sends for d in done])
            sent += sum(d.sends for d in done)
            interrupted = stop.is_set
            if interrupted:
                stage_samples, stage_s = stopped_stage(collected)
            else:
                stage_samples = sorted(collected, key=lambda s: s.seq)
                stage_s = measured_seconds(stage_samples, stage_start_ms(
                    stage, stage_samples, clock.ms(start_ns)))
            summary = await asyncio.to_thread(summarise_stage, stage_samples, stage_s, slo,
                                              steady_only=book.steady_only)
            book.record(stage, stage_samples, stage_s, summary)
            if interrupted:
                book.stopped = stop.reason
                break
    finally:
        if timer is not None:
            timer.cancel()
    return book.result(await asyncio.to_thread(book.overall, slo))


async def run_shards(channels: list[RunChannel], shards: list[Shard],
                     index: int, seq: int, start_ns: int, shares: list[int | None],
                     limit_reason: str, stop: RunStop, max_rate: float | None = None
                     ) -> list[StageDone]:
    """Every shard with a share of the stage, from `start_ns`, until all are done; `stop`
    stops them all, and a shard that stopped early on its own stops the others."""
    if stop.is_set:
        return []
    pending: dict[asyncio.Future[Any], RunChannel] = {}
    for position, (shard, share) in enumerate(zip(shards, shares, strict=True)):
        if shard.stage is None or share == 0:
            continue
        channel = channels[position]
        pending[asyncio.create_task(channel.stage(index, shard, seq, start_ns, share,
                                                  limit_reason, max_rate))] = channel
    finished: list[StageDone] = []
    waiter: asyncio.Future[Any] = asyncio.create_task(stop.wait())
    stopping = False
    try:
        while pending:
            done, _ = await asyncio.wait({*pending, waiter}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is waiter:
                    continue
                pending.pop(task)
                outcome = task.result()
                assert isinstance(outcome, StageDone)
                finished.append(outcome)
                if outcome.stopped is not None:
                    stop.set(outcome.stopped)
            if stop.is_set and not stopping:
                stopping = True
                for channel in pending.values():
                    channel.stop(stop.reason or "stopped")
    finally:
        waiter.cancel()
        for task in pending:
            task.cancel()
        await asyncio.gather(waiter, *pending, return_exceptions=True)
    return finished
