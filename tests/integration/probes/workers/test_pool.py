"""Runs measured in worker processes: the same requests as one process sends, exact merged
percentiles, samples that stream back while a run goes, stops that reach the workers, and
a worker that dies failing only its runs before a new one takes its place."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.secret_policy import SecretPolicy
from sustain.probes.client.secrets import SecretUnavailableError
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import parse_profile
from sustain.probes.measure.percentiles import distribution
from sustain.probes.measure.sample import Sample
from sustain.probes.runner import RunBudget, RunStop, TooManyWorkersError, execute
from sustain.probes.workers.pool import WorkerPool
from sustain.probes.workers.process import WorkerDiedError
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload
from tests.conftest import SimulatorHandle

SHORT = Workload(max_tokens=4)


@pytest.fixture
async def pool() -> AsyncIterator[WorkerPool]:
    async with WorkerPool(2) as workers:
        yield workers


def target(sim: SimulatorHandle, **fields: Any) -> Target:
    return Target(base_url=sim.base_url, api_kind=ApiKind.OPENAI_CHAT, model="m", **fields)


async def test_two_workers_send_the_requests_one_process_sends(
        pool: WorkerPool, simulator: SimulatorHandle) -> None:
    raw = {"kind": "poisson", "rate": 40, "duration_s": 1.5, "warmup_s": 0.25, "seed": 11}
    async with HttpClients() as clients:
        alone = await execute(clients, target(simulator), SHORT, parse_profile(raw))
    split = await pool.measure(target(simulator), SHORT, parse_profile({**raw, "workers": 2}))
    assert split.summary.attempts == alone.summary.attempts > 0
    assert split.summary.failures == 0

    def intended(samples: list[Sample]) -> list[tuple[int, float]]:
        assert all(s.t_sched_ms is not None for s in samples)
        first = min(s.t_sched_ms or 0.0 for s in samples)
        return sorted((s.seq, round((s.t_sched_ms or 0.0) - first, 6)) for s in samples)

    assert intended(split.samples) == intended(alone.samples)
    # Every request's lag is measured, and the run's saturation verdict is its own lag p99
    # against its threshold, whatever the lag came to on this machine (how low it stays is
    # benchmarks/capacity.py's figure, with --workers).
    generator = split.summary.generator
    assert split.summary.lag_ms.count == split.summary.attempts
    assert generator.lag_p99_ms is not None
    assert generator.threshold_ms is not None
    assert generator.lag_p99_ms == split.summary.lag_ms.p99
    assert generator.saturated == (generator.lag_p99_ms > generator.threshold_ms)


async def test_merged_percentiles_are_the_percentiles_of_all_samples(
        pool: WorkerPool, simulator: SimulatorHandle) -> None:
    profile = parse_profile({"kind": "concurrency", "users": 6, "max_requests": 61,
                             "workers": 2})
    result = await pool.measure(target(simulator), SHORT, profile)
    assert result.summary.attempts == 61
    assert len({s.seq for s in result.samples}) == 61
    ttft = [s.ttft_ms for s in result.samples if s.ttft_ms is not None]
    assert result.summary.ttft_ms == distribution(ttft)
    assert result.summary.e2e_ms == distribution([s.e2e_ms for s in result.samples])
    assert result.stages[0].summary.ttft_ms == distribution(ttft)


async def test_samples_stream_back_while_the_run_goes(pool: WorkerPool,
                                                      simulator: SimulatorHandle) -> None:
    """The first sample to come back stops a 30 s run: it can only come back in time to do
    that if samples stream back while the run goes, not all at its end."""
    stop = RunStop()
    arrivals: list[Sample] = []

    def measured(sample: Sample) -> None:
        arrivals.append(sample)
        stop.set("the first sample is back")

    result = await pool.measure(
        target(simulator), SHORT,
        parse_profile({"kind": "constant", "rate": 20, "duration_s": 30}),
        stop=stop, on_sample=measured)
    assert result.stopped == "the first sample is back"
    assert arrivals
    assert result.summary.attempts < 20 * 30, "the run did not go its whole 30 s"


async def test_a_stop_reaches_the_workers_at_once(pool: WorkerPool,
                                                  simulator: SimulatorHandle) -> None:
    stop = RunStop()
    seen: list[Sample] = []
    ten = asyncio.Event()

    def measured(sample: Sample) -> None:
        seen.append(sample)
        if len(seen) >= 10:
            ten.set()

    run = asyncio.create_task(pool.measure(
        target(simulator), SHORT,
        parse_profile({"kind": "constant", "rate": 20, "duration_s": 30, "workers": 2}),
        stop=stop, on_sample=measured))
    await asyncio.wait_for(ten.wait(), 30)
    asked = time.monotonic()
    stop.set("cancelled on request")
    result = await run
    # Only guards against a hang: the stop reaches the workers in milliseconds; without it
    # the run would go on for its 30 s.
    assert time.monotonic() - asked < 10.0
    assert result.stopped == "cancelled on request"
    assert 10 <= result.summary.attempts < 20 * 30


async def test_the_request_budget_holds_across_workers(pool: WorkerPool,
                                                       simulator: SimulatorHandle) -> None:
    result = await pool.measure(
        target(simulator), SHORT,
        parse_profile({"kind": "concurrency", "users": 4, "duration_s": 30, "workers": 2}),
        budget=RunBudget(seconds=60, requests=30))
    assert result.stopped == "stopped at the limit of 30 requests per run"
    assert result.summary.attempts <= 30


async def test_the_closed_loop_pace_holds_across_workers(pool: WorkerPool,
                                                          simulator: SimulatorHandle) -> None:
    """Two workers share the run's max_rate (each paces at half of it): 200 users send at
    most 20 requests/s in all. An upper bound on the count: slowness only lowers it."""
    began = time.perf_counter()
    result = await pool.measure(
        target(simulator), SHORT,
        parse_profile({"kind": "concurrency", "users": 200, "duration_s": 1, "workers": 2}),
        budget=RunBudget(seconds=60, requests=1_000_000, max_rate=20))
    # Each worker may send one request at the start of its pace (+2).
    assert 0 < result.summary.attempts <= 2 + 20 * (time.perf_counter() - began)


async def test_a_secret_is_resolved_in_the_worker_and_refused_there(
        pool: WorkerPool, simulator: SimulatorHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference crosses the pipe, never the value: the worker reads its own environment
    (inherited), under the policy the run was given."""
    monkeypatch.setenv("TEST_WORKER_TOKEN", "tok")
    ok = await pool.measure(target(simulator, auth_secret_ref="env:TEST_WORKER_TOKEN"), SHORT,
                            parse_profile({"kind": "single"}),
                            secrets=SecretPolicy(env_globs=("TEST_*",)))
    assert ok.summary.successes == 1
    with pytest.raises(SecretUnavailableError, match="TEST_WORKER_TOKEN"):
        await pool.measure(target(simulator, auth_secret_ref="env:TEST_WORKER_TOKEN"), SHORT,
                           parse_profile({"kind": "single"}), secrets=SecretPolicy())


async def test_a_run_cannot_ask_for_more_workers_than_the_pool_has(
        pool: WorkerPool, simulator: SimulatorHandle) -> None:
    with pytest.raises(TooManyWorkersError, match="at most 2"):
        await pool.measure(target(simulator), SHORT,
                           parse_profile({"kind": "single", "workers": 3}))


async def test_a_worker_that_dies_fails_its_run_and_is_replaced(
        simulator: SimulatorHandle) -> None:
    async with WorkerPool(1) as pool:
        first = asyncio.Event()
        run = asyncio.create_task(pool.measure(
            target(simulator), SHORT,
            parse_profile({"kind": "constant", "rate": 20, "duration_s": 30}),
            on_sample=lambda _sample: first.set()))
        await asyncio.wait_for(first.wait(), 30)
        (victim,) = pool.pids
        os.kill(victim, signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match=rf"pid {victim}\) was killed by SIGKILL"):
            await asyncio.wait_for(run, 30)  # a hang guard: the death is noticed at once
        async with asyncio.timeout(60):  # until the new worker is up (a hang guard only)
            while not pool.pids:  # noqa: ASYNC110 - the pool has no event for it
                await asyncio.sleep(0.05)
        assert pool.pids
        assert pool.pids != [victim]
        assert pool.replaced == 1
        again = await pool.measure(target(simulator), SHORT, parse_profile({"kind": "single"}))
        assert again.summary.successes == 1


async def test_a_worker_holds_none_of_sustain_s_credentials(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The process that talks to endpoints never has the database URL or the admin key:
    not in its environment, and a secret policy reaches it with their digests only."""
    monkeypatch.setenv("SUSTAIN_ADMIN_KEY", "sk_sustain_" + "k" * 43)
    monkeypatch.setenv("SUSTAIN_DATABASE_URL", "postgresql://u:hunter2@db/sustain")
    monkeypatch.setenv("PGPASSWORD", "hunter2")
    monkeypatch.setenv("TEST_ALLOWED", "fine")
    async with WorkerPool(1) as pool:
        (worker,) = await pool.lease(1)
        environ = await asyncio.to_thread(Path(f"/proc/{worker.pid}/environ").read_bytes)
    assert b"hunter2" not in environ
    assert b"sk_sustain_" not in environ
    assert b"TEST_ALLOWED=fine" in environ


async def test_a_run_on_a_worker_that_just_died_fails_at_once(
        simulator: SimulatorHandle) -> None:
    async with WorkerPool(1) as pool:
        (worker,) = await pool.lease(1)
        channel = worker.channel(99)
        os.kill(worker.pid, signal.SIGKILL)
        await worker.process.wait()
        async with asyncio.timeout(30):  # until the pool has seen it die (a hang guard only)
            while worker.dead is None:  # noqa: ASYNC110 - nor for this
                await asyncio.sleep(0.02)
        with pytest.raises(WorkerDiedError, match="SIGKILL"):
            await asyncio.wait_for(channel.open(target(simulator), SHORT, SecretPolicy(),
                                                DatasetPolicy()), 30)
