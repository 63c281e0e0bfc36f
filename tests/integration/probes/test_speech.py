"""Speech against the simulator over real loopback HTTP, through both client paths: the audio
streams as raw pcm or wav bytes or as SSE deltas, its first byte is TTFT, a run reports the
audio's seconds, the real-time factor and the input's characters, every request of a run at
8 users is accounted for, and each fault is classified."""

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
ITL_MS = 3.0
MS_PER_CHAR = 10.0
CHUNK_MS = 100.0
PROMPT = "speak these words aloud please"
"""30 characters: 300 ms of audio, three chunks of 100 ms."""


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundSimulator]:
    config = SimulatorConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS,
                             speech_audio_ms_per_char=MS_PER_CHAR, speech_chunk_ms=CHUNK_MS)
    with BackgroundSimulator(config) as server:
        yield server


async def run(client: HttpClients, sim: BackgroundSimulator, *, via_httpx: bool = False,
              fault: Fault | None = None, profile: object = None, **workload: object
              ) -> RunResult:
    target = Target(base_url=sim.base_url, api_kind=ApiKind.OPENAI_SPEECH, model="tts-sim",
                    http2=via_httpx, headers={FAULT_HEADER: fault.value} if fault else {})
    return await execute(client, target, Workload(prompt=PROMPT, cache="allow",
                                                  **workload),  # type: ignore[arg-type]
                         SingleProfile() if profile is None else profile)  # type: ignore[arg-type]


async def one(client: HttpClients, sim: BackgroundSimulator, **kwargs: object
              ) -> Measurement:
    (sample,) = (await run(client, sim, **kwargs)).samples  # type: ignore[arg-type]
    return sample.measurement


@pytest.mark.parametrize(("audio_format", "stream_format"),
                         [("pcm", "audio"), ("wav", "audio"), ("pcm", "sse")])
async def test_speech_is_timed_from_its_first_audio_and_counted_in_seconds(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool, audio_format: str,
        stream_format: str) -> None:
    m = await one(client, sim, via_httpx=via_httpx, audio_format=audio_format,
                  stream_format=stream_format)
    assert m.error_class is None, m.error_detail
    assert m.streamed is True
    assert m.input_chars == len(PROMPT)
    assert m.audio_s == pytest.approx(len(PROMPT) * MS_PER_CHAR / 1000)
    assert m.ttft_ms is not None
    assert m.ttft_ms >= TTFT_MS
    assert len(m.itl_ms) == 2  # three chunks
    assert m.e2e_ms >= TTFT_MS + 2 * ITL_MS
    assert m.rtf == pytest.approx(m.e2e_ms / 1000 / (len(PROMPT) * MS_PER_CHAR / 1000))
    if stream_format == "sse":
        assert m.tokens_server_counted  # speech.audio.done's usage
        assert m.input_tokens == 8  # the simulator's token per 4 characters


async def test_a_run_at_8_users_accounts_for_every_request_and_reports_audio(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool) -> None:
    result = await run(client, sim, via_httpx=via_httpx,
                       profile=ConcurrencyProfile(users=8, max_requests=40))
    summary = result.summary
    assert summary.attempts == summary.successes + summary.failures == 40
    assert summary.successes == 40
    assert summary.audio_s == pytest.approx(40 * len(PROMPT) * MS_PER_CHAR / 1000)
    assert summary.input_chars == 40 * len(PROMPT)
    assert summary.rtf_ratio is not None
    assert summary.rtf_ratio.count == 40
    assert summary.ttft_ms.count == 40


async def test_a_synthetic_prompt_is_spoken_too(client: HttpClients,
                                               sim: BackgroundSimulator) -> None:
    target = Target(base_url=sim.base_url, api_kind=ApiKind.OPENAI_SPEECH, model="tts-sim")
    result = await execute(client, target, Workload(input_tokens=12), SingleProfile())
    (sample,) = result.samples
    m = sample.measurement
    assert m.error_class is None, m.error_detail
    assert m.input_chars is not None
    assert m.audio_s == pytest.approx(m.input_chars * MS_PER_CHAR / 1000, abs=0.001)


@pytest.mark.parametrize(("fault", "stream_format", "expected"), [
    (Fault.TRUNCATE, "audio", ErrorClass.TRUNCATED),
    (Fault.TRUNCATE, "sse", ErrorClass.TRUNCATED),
    (Fault.EMPTY, "audio", ErrorClass.EMPTY),
    (Fault.ERROR_EVENT, "sse", ErrorClass.HTTP_5XX),
    (Fault.MALFORMED, "sse", ErrorClass.PROTOCOL),
    (Fault.WRONG_CONTENT_TYPE, "audio", ErrorClass.PROTOCOL),
    (Fault.HTTP_500, "audio", ErrorClass.HTTP_5XX),
    (Fault.HTTP_429, "audio", ErrorClass.HTTP_429),
])
async def test_a_fault_is_classified(client: HttpClients, sim: BackgroundSimulator,
                                     via_httpx: bool, fault: Fault, stream_format: str,
                                     expected: ErrorClass) -> None:
    m = await one(client, sim, via_httpx=via_httpx, fault=fault, stream_format=stream_format)
    assert m.error_class is expected, m.error_detail
    assert m.rtf is None


async def test_a_speech_server_that_never_speaks_times_out_at_its_first_audio(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool) -> None:
    target = Target(base_url=sim.base_url, api_kind=ApiKind.OPENAI_SPEECH, model="tts-sim",
                    http2=via_httpx, headers={FAULT_HEADER: Fault.HANG.value},
                    timeout_first_token_s=0.3, timeout_total_s=5.0)
    result = await execute(client, target, Workload(prompt=PROMPT), SingleProfile())
    (sample,) = result.samples
    assert sample.measurement.error_class is ErrorClass.TIMEOUT_FIRST_TOKEN
