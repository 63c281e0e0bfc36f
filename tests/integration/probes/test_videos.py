"""Video jobs against the simulator over real loopback HTTP, through both client paths: one job
is one sample (create, polls, content), its phases match the simulator's own transitions (the
queue and the generation told apart), every job of a run at 8 users is accounted for, a failed
job is `job_failed`, and a job that outlives the total timeout is `timeout_total` and cancelled (the
simulator sees its DELETE)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import ConcurrencyProfile, SingleProfile
from sustain.probes.measure.sample import JOB_PHASES, ErrorClass, Measurement
from sustain.probes.run_result import RunResult
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import FAULT_HEADER, Fault, SimulatorConfig
from sustain.simulator.server import BackgroundSimulator

QUEUE_MS = 200.0
GENERATION_MS = 400.0
VIDEO_BYTES = 3 * 1024 * 1024 + 17
POLL_S = 0.05


@pytest.fixture(scope="module")
def truth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("videos") / "truth.jsonl"


@pytest.fixture(scope="module")
def sim(truth: Path) -> Iterator[BackgroundSimulator]:
    config = SimulatorConfig(video_queue_ms=QUEUE_MS, video_generation_ms=GENERATION_MS,
                             video_bytes=VIDEO_BYTES, truth_log=str(truth))
    with BackgroundSimulator(config) as server:
        yield server


MARGIN_POLLS = 3
"""A phase is seen at the poll after its transition: one interval late by design, more on a
busy machine (the simulator shares this process). Three intervals (150 ms) tell a phase from
its neighbour (each is longer) without bounding how late a poll may be; how close the phases
really are is benchmarks/media_accuracy.py's figure."""


def records(truth: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in truth.read_text().splitlines()]


async def logged(truth: Path, before: int) -> list[dict[str, float]]:
    """The lines the simulator logged after the first `before`, once there is one (it logs a
    job after answering its last request, which the client may have read first)."""
    for _ in range(100):
        if len(found := records(truth)[before:]) >= 1:
            return found
        await asyncio.sleep(0.02)
    return []


async def run(client: HttpClients, sim: BackgroundSimulator, *, via_httpx: bool = False,
              fault: Fault | None = None, profile: object = None,
              timeout_total_s: float = 30.0) -> RunResult:
    target = Target(base_url=sim.base_url, api_kind=ApiKind.OPENAI_VIDEOS, model="sora-sim",
                    http2=via_httpx, timeout_total_s=timeout_total_s,
                    headers={FAULT_HEADER: fault.value} if fault else {})
    return await execute(client, target, Workload(prompt="a paper boat on a river",
                                                  poll_interval_s=POLL_S),
                         SingleProfile() if profile is None else profile)  # type: ignore[arg-type]


async def one(client: HttpClients, sim: BackgroundSimulator, **kwargs: object
              ) -> Measurement:
    (sample,) = (await run(client, sim, **kwargs)).samples  # type: ignore[arg-type]
    return sample.measurement


async def test_a_job_is_one_sample_with_its_phases_within_a_poll_of_the_servers(
        client: HttpClients, sim: BackgroundSimulator, truth: Path, via_httpx: bool) -> None:
    before = len(records(truth))
    m = await one(client, sim, via_httpx=via_httpx)
    assert m.error_class is None, m.error_detail
    assert (m.ttft_ms, m.itl_ms, m.http_status) == (None, (), 200)
    assert m.phases_ms is not None
    phases = dict(m.phases_ms)
    assert tuple(phases) == JOB_PHASES
    (job,) = await logged(truth, before)
    margin_ms = MARGIN_POLLS * POLL_S * 1000
    assert 0 <= phases["queue"] - (job["started"] - job["created"]) * 1000 <= margin_ms
    assert abs(phases["generation"] - (job["completed"] - job["started"]) * 1000) <= \
        margin_ms
    assert phases["content"] >= (job["content_served"] - job["content_start"]) * 1000
    assert m.e2e_ms >= sum(phases.values())


async def test_a_run_at_8_users_accounts_for_every_job(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool) -> None:
    result = await run(client, sim, via_httpx=via_httpx,
                       profile=ConcurrencyProfile(users=8, max_requests=16))
    summary = result.summary
    assert summary.attempts == summary.successes + summary.failures == 16
    assert summary.successes == 16
    assert summary.job_phases_ms is not None
    assert {name: d.count for name, d in summary.job_phases_ms.items()} == \
        dict.fromkeys(JOB_PHASES, 16)
    assert summary.ttft_ms.count == 0


async def test_a_failed_job_is_job_failed_and_not_cancelled(
        client: HttpClients, sim: BackgroundSimulator, truth: Path, via_httpx: bool) -> None:
    before = len(records(truth))
    m = await one(client, sim, via_httpx=via_httpx, fault=Fault.ERROR_EVENT)
    assert m.error_class is ErrorClass.JOB_FAILED
    assert m.error_detail == "job failed: video_generation_failed"
    assert m.phases_ms is None
    (job,) = await logged(truth, before)
    assert "failed" in job
    assert "deleted" not in job
    assert m.e2e_ms >= (job["failed"] - job["created"]) * 1000


async def test_a_job_past_the_total_timeout_is_timeout_total_and_deleted(
        client: HttpClients, sim: BackgroundSimulator, truth: Path, via_httpx: bool) -> None:
    before = len(records(truth))
    m = await one(client, sim, via_httpx=via_httpx, fault=Fault.HANG, timeout_total_s=0.6)
    assert m.error_class is ErrorClass.TIMEOUT_TOTAL
    assert m.e2e_ms >= 600
    (job,) = await logged(truth, before)
    assert job["deleted"] > job["started"]  # cancelled while it ran
    assert 1 <= job["polls"] <= 0.6 / POLL_S + 1  # polled on its schedule, no more


async def test_a_refused_create_is_classified_and_nothing_is_polled(
        client: HttpClients, sim: BackgroundSimulator, truth: Path, via_httpx: bool) -> None:
    before = len(records(truth))
    m = await one(client, sim, via_httpx=via_httpx, fault=Fault.HTTP_429)
    assert m.error_class is ErrorClass.HTTP_429
    assert m.http_status == 429
    await asyncio.sleep(0.2)
    assert records(truth)[before:] == []  # no job, so no DELETE either
