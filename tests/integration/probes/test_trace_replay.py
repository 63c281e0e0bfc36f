"""Replaying a Mooncake and an Azure trace against the simulator: every request intended at
its time, with the trace's output length, in one process and over two workers. How late the
requests actually leave (lag p99 <= 5 ms) depends on the machine: the open loop's lag is
benchmarks/capacity.py's figure; here the run's saturation verdict must be its own lag's."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import TraceProfile
from sustain.probes.run_result import RunResult
from sustain.probes.runner import execute
from sustain.probes.workers.pool import WorkerPool
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload
from tests.conftest import SimulatorHandle

ANYWHERE = DatasetPolicy.unrestricted()
COUNT = 60


def trace_rows(seed: int) -> list[tuple[float, int, int]]:
    """COUNT requests over about 3 s, bursty: (offset s, input tokens, output tokens <= 32)."""
    rng = random.Random(seed)
    at, rows = 0.0, []
    for _ in range(COUNT):
        rows.append((at, rng.randint(8, 200), rng.randint(1, 32)))
        at += rng.expovariate(20.0)
    return rows


def write_mooncake(path: Path, rows: list[tuple[float, int, int]]) -> str:
    path.write_text("\n".join(json.dumps({
        "timestamp": round(at * 1000, 3), "input_length": inp, "output_length": out,
        "hash_ids": [index % 3]}) for index, (at, inp, out) in enumerate(rows)) + "\n")
    return str(path)


def write_azure(path: Path, rows: list[tuple[float, int, int]]) -> str:
    start = datetime(2023, 11, 16, 18, 15, 46)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for at, inp, out in rows:
        stamp = start + timedelta(seconds=at)
        lines.append(f"{stamp:%Y-%m-%d %H:%M:%S}.{stamp.microsecond:06d}0,{inp},{out}")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def check(result: RunResult, rows: list[tuple[float, int, int]]) -> None:
    assert result.summary.attempts == COUNT
    assert result.summary.failures == 0
    samples = sorted(result.samples, key=lambda s: s.seq)
    assert [s.seq for s in samples] == list(range(COUNT))
    first = samples[0].t_sched_ms or 0.0
    for sample, (at, inp, out) in zip(samples, rows, strict=True):
        assert (sample.t_sched_ms or 0.0) - first == pytest.approx(at * 1000, abs=0.01)
        assert sample.measurement.output_tokens == out
        assert sample.measurement.input_tokens == inp  # the run's salt counted in
    assert result.summary.lag_ms.count == COUNT
    generator = result.summary.generator
    assert generator.lag_p99_ms is not None
    assert generator.threshold_ms is not None
    assert generator.saturated == (generator.lag_p99_ms > generator.threshold_ms)


@pytest.mark.parametrize("fmt", ["mooncake", "azure"])
async def test_a_trace_is_replayed_at_its_times_with_its_lengths(
        simulator: SimulatorHandle, tmp_path: Path, fmt: str) -> None:
    rows = trace_rows(7)
    path = (write_mooncake if fmt == "mooncake" else write_azure)(tmp_path / "trace", rows)
    target = Target(base_url=simulator.base_url, api_kind=ApiKind.OPENAI_CHAT, model="m")
    profile = TraceProfile(path=path, format=fmt)  # type: ignore[arg-type]
    async with HttpClients() as clients:
        check(await execute(clients, target, Workload(), profile, datasets=ANYWHERE), rows)
    async with WorkerPool(2) as pool:
        split = await pool.measure(target, Workload(), profile.model_copy(update={"workers": 2}),
                                   datasets=ANYWHERE)
    check(split, rows)
