"""Transcriptions against the simulator over real loopback HTTP, through both client paths:
each request sends its own synthetic audio as a multipart form; a stream's first text is its
TTFT, and every run reports the audio's seconds and the real-time factor (E2E over the audio's
length), which the simulator's per-second cost bounds from below."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import ConcurrencyProfile, SingleProfile
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.run_result import RunResult
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import FAULT_HEADER, Fault, SimulatorConfig
from sustain.simulator.server import BackgroundSimulator

TTFT_MS = 20.0
ITL_MS = 2.0
AUDIO_MS_PER_S = 30.0
AUDIO_S = 2.0
TOKENS = 8
KEY = "sim-key-for-audio"


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundSimulator]:
    config = SimulatorConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS, audio_ms_per_s=AUDIO_MS_PER_S,
                             output_tokens=TOKENS)
    with BackgroundSimulator(config) as server:
        yield server


async def run(client: HttpClients, sim: BackgroundSimulator, *, stream: bool = True,
              via_httpx: bool = False, fault: Fault | None = None,
              profile: object = None) -> RunResult:
    target = Target(base_url=sim.base_url, api_kind=ApiKind.OPENAI_TRANSCRIPTIONS,
                    model="whisper-sim", http2=via_httpx,
                    headers={FAULT_HEADER: fault.value} if fault else {})
    return await execute(client, target, Workload(audio_s=AUDIO_S, stream=stream),
                         SingleProfile() if profile is None else profile)  # type: ignore[arg-type]


async def one(client: HttpClients, sim: BackgroundSimulator, **kwargs: object
              ) -> Measurement:
    (sample,) = (await run(client, sim, **kwargs)).samples  # type: ignore[arg-type]
    return sample.measurement


async def test_a_streamed_transcript_is_timed_from_its_first_text(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool) -> None:
    m = await one(client, sim, via_httpx=via_httpx)
    assert m.error_class is None, m.error_detail
    assert m.audio_s == AUDIO_S
    assert (m.output_tokens, m.tokens_server_counted) == (TOKENS, True)
    assert m.input_tokens == 20  # the simulator's 10 audio tokens per second
    assert m.ttft_ms is not None
    assert m.ttft_ms >= TTFT_MS + AUDIO_MS_PER_S * AUDIO_S
    assert len(m.itl_ms) == TOKENS - 1
    assert m.rtf is not None
    assert m.rtf >= (TTFT_MS + AUDIO_MS_PER_S * AUDIO_S) / 1000 / AUDIO_S


async def test_a_whole_transcript_is_timed_end_to_end(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool) -> None:
    m = await one(client, sim, stream=False, via_httpx=via_httpx)
    assert m.error_class is None, m.error_detail
    assert m.ttft_ms is None
    assert m.output_tokens == TOKENS
    assert m.e2e_ms >= TTFT_MS + AUDIO_MS_PER_S * AUDIO_S + (TOKENS - 1) * ITL_MS


async def test_a_run_reports_audio_seconds_and_the_real_time_factor(
        client: HttpClients, sim: BackgroundSimulator) -> None:
    result = await run(client, sim, profile=ConcurrencyProfile(users=2, max_requests=6))
    summary = result.summary
    assert summary.successes == 6
    assert summary.audio_s == 6 * AUDIO_S
    assert summary.rtf_ratio is not None
    assert summary.rtf_ratio.count == 6
    assert summary.rtf_ratio.p50 is not None
    assert summary.e2e_ms.p50 is not None
    assert summary.rtf_ratio.p50 == pytest.approx(summary.e2e_ms.p50 / 1000 / AUDIO_S)


@pytest.mark.parametrize(("fault", "expected"), [
    (Fault.ERROR_EVENT, ErrorClass.HTTP_5XX),
    (Fault.TRUNCATE, ErrorClass.TRUNCATED),
    (Fault.MALFORMED, ErrorClass.PROTOCOL),
    (Fault.HTTP_500, ErrorClass.HTTP_5XX),
    (Fault.HTTP_429, ErrorClass.HTTP_429),
])
async def test_a_fault_is_classified(client: HttpClients, sim: BackgroundSimulator,
                                     fault: Fault, expected: ErrorClass) -> None:
    m = await one(client, sim, fault=fault)
    assert m.error_class is expected, m.error_detail
    assert m.rtf is None
