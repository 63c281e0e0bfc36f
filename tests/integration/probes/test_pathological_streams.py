"""The probe client against the simulator's pathological but well-formed streams (config.Fault,
from `one_write` on), over real loopback HTTP through both client paths: each is classified as
a careful monitoring tool should, and every figure it yields is finite and non-negative."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import SingleProfile
from sustain.probes.measure.sample import ErrorClass, Outcome, Sample
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import FAULT_HEADER, Fault, SimulatorConfig
from sustain.simulator.server import BackgroundSimulator
from tests.processes import SustainProcess, free_port

TTFT_MS = 50.0
ITL_MS = 20.0
MAX_TOKENS = 16
"""What each request asks for: fewer than the simulator's 32 tokens, so a normal stream
has 16 and finishes with "length"."""
SLOW_ITL_MS = 2000.0
"""The ITL of the simulator that checks a stream written with no wait between its tokens:
one that waited would take 30 s, so 'no wait' is told apart however busy the machine."""


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundSimulator]:
    config = SimulatorConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS, output_tokens=32)
    with BackgroundSimulator(config) as server:
        yield server




async def one(client: HttpClients, base_url: str, fault: Fault | None, via_httpx: bool,
              api_kind: ApiKind = ApiKind.OPENAI_CHAT) -> Sample:
    """One streamed request (asking for usage) with `fault` in the simulator's fault header."""
    target = Target(base_url=base_url, api_kind=api_kind, model="m", http2=via_httpx,
                    headers={FAULT_HEADER: fault.value} if fault else {})
    result = await execute(client, target, Workload(max_tokens=MAX_TOKENS), SingleProfile())
    (sample,) = result.samples
    return sample


def assert_sane(s: Sample) -> None:
    """Every figure finite and non-negative, TTFT within E2E."""
    m = s.measurement
    figures = [m.e2e_ms, *m.itl_ms, *(v for v in (m.ttft_ms, s.tpot_ms) if v is not None)]
    assert all(math.isfinite(v) and v >= 0 for v in figures), figures
    assert m.ttft_ms is None or m.ttft_ms <= m.e2e_ms
    assert m.http_status == 200


async def test_one_write_stream_succeeds_with_zero_tpot(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool) -> None:
    s = await one(client, sim.base_url, Fault.ONE_WRITE, via_httpx)
    m = s.measurement
    assert_sane(s)
    assert s.outcome is Outcome.SUCCESS
    assert (m.output_tokens, m.tokens_server_counted) == (MAX_TOKENS, True)
    assert m.ttft_ms is not None
    assert m.ttft_ms >= TTFT_MS
    assert m.itl_ms == (0.0,) * (MAX_TOKENS - 1)  # every token in the same read
    assert m.e2e_ms == m.ttft_ms
    assert s.tpot_ms == 0.0


async def test_single_token_stream_succeeds_without_itl_or_tpot(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool) -> None:
    s = await one(client, sim.base_url, Fault.SINGLE_TOKEN, via_httpx)
    m = s.measurement
    assert_sane(s)
    assert s.outcome is Outcome.SUCCESS
    assert (m.output_tokens, m.tokens_server_counted) == (1, True)
    assert m.ttft_ms is not None
    assert m.ttft_ms >= TTFT_MS
    assert m.itl_ms == ()
    assert s.tpot_ms is None  # defined from 2 tokens on


async def test_zero_tokens_stream_is_empty_with_a_server_counted_zero(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool) -> None:
    s = await one(client, sim.base_url, Fault.ZERO_TOKENS, via_httpx)
    m = s.measurement
    assert_sane(s)
    assert m.error_class is ErrorClass.EMPTY
    assert (m.output_tokens, m.tokens_server_counted) == (0, True)
    assert m.ttft_ms is None
    assert m.itl_ms == ()
    assert s.tpot_ms is None
    assert m.e2e_ms >= TTFT_MS


async def test_usage_only_stream_is_empty_without_ttft(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool) -> None:
    """Usage that counts tokens never sent delivers nothing: `empty`, not a success. The
    measurement keeps the server's count (output_tokens is what usage said); a failure's
    tokens are left out of every summary."""
    s = await one(client, sim.base_url, Fault.USAGE_ONLY, via_httpx)
    m = s.measurement
    assert_sane(s)
    assert m.error_class is ErrorClass.EMPTY
    assert (m.output_tokens, m.tokens_server_counted) == (MAX_TOKENS, True)
    assert m.ttft_ms is None
    assert m.itl_ms == ()
    assert s.tpot_ms is None
    assert m.e2e_ms >= TTFT_MS


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[BackgroundSimulator]:
    config = SimulatorConfig(ttft_ms=TTFT_MS, itl_ms=SLOW_ITL_MS, output_tokens=32)
    with BackgroundSimulator(config) as server:
        yield server


async def test_identical_timestamps_stream_succeeds_with_near_zero_itl(
        client: HttpClients, slow_sim: BackgroundSimulator, via_httpx: bool) -> None:
    s = await one(client, slow_sim.base_url, Fault.IDENTICAL_TIMESTAMPS, via_httpx)
    m = s.measurement
    assert_sane(s)
    assert s.outcome is Outcome.SUCCESS
    assert (m.output_tokens, m.tokens_server_counted) == (MAX_TOKENS, True)
    assert m.ttft_ms is not None
    assert m.ttft_ms >= TTFT_MS
    assert len(m.itl_ms) == MAX_TOKENS - 1
    assert s.tpot_ms is not None
    # written with no wait between them: less than one of the ITLs a normal stream waits
    assert sum(m.itl_ms) < SLOW_ITL_MS


async def test_overlong_stream_succeeds_counting_every_token_sent(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool) -> None:
    """A server that overruns max_tokens still answered: the client reports what it sent."""
    s = await one(client, sim.base_url, Fault.OVERLONG, via_httpx)
    m = s.measurement
    sent = 2 * MAX_TOKENS + 3
    assert_sane(s)
    assert s.outcome is Outcome.SUCCESS
    assert (m.output_tokens, m.tokens_server_counted) == (sent, True)
    assert m.ttft_ms is not None
    assert m.ttft_ms >= TTFT_MS
    assert len(m.itl_ms) == sent - 1
    assert s.tpot_ms is not None
    assert s.tpot_ms > 0
    assert m.e2e_ms >= TTFT_MS + (sent - 1) * ITL_MS


@pytest.mark.parametrize("api_kind", [ApiKind.OPENAI_CHAT, ApiKind.OPENAI_COMPLETIONS])
async def test_instant_stream_succeeds_with_ttft_equal_to_e2e(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool,
        api_kind: ApiKind) -> None:
    s = await one(client, sim.base_url, Fault.INSTANT, via_httpx, api_kind)
    m = s.measurement
    assert_sane(s)
    assert s.outcome is Outcome.SUCCESS
    assert (m.output_tokens, m.tokens_server_counted) == (MAX_TOKENS, True)
    assert m.ttft_ms is not None
    assert m.ttft_ms >= TTFT_MS
    assert m.itl_ms == ()  # one output event
    assert m.e2e_ms == m.ttft_ms
    assert s.tpot_ms == 0.0


async def test_simulate_command_injects_a_pathological_stream(
        client: HttpClients, tmp_path: Path) -> None:
    """`sustain simulate --fault NAME --fault-rate 1` takes the new faults as they are."""
    port = free_port()
    with SustainProcess(["simulate", "--port", str(port), "--ttft-ms", "5", "--itl-ms", "1",
                         "--fault", "one_write", "--fault-rate", "1"],
                        tmp_path / "simulator.log") as process:
        process.wait_http(f"http://127.0.0.1:{port}/v1/models")
        s = await one(client, f"http://127.0.0.1:{port}/v1", None, via_httpx=False)
    assert s.outcome is Outcome.SUCCESS
    assert s.measurement.itl_ms == (0.0,) * (MAX_TOKENS - 1)
    assert s.tpot_ms == 0.0
