"""A server that ignores `stream: true` and answers one JSON body (OpenAI's whisper-1, some chat
gateways), against the simulator's `ignore_stream` over real loopback HTTP, through both client
paths: the whole answer is a success measured end to end, its TTFT is its E2E, the sample says
it was not streamed, and the run counts such requests. A 2xx answer to a streamed request that
is neither an event stream nor JSON is still a protocol error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import ConcurrencyProfile, SingleProfile
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.report_tables import summary_table
from sustain.probes.run_result import RunResult
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import FAULT_HEADER, Fault, SimulatorConfig
from sustain.simulator.server import BackgroundSimulator
from tests.unit.probes.test_report_tables import text as rendered

TTFT_MS = 20.0
ITL_MS = 2.0
TOKENS = 8


@pytest.fixture(scope="module")
def whole_sim() -> Iterator[BackgroundSimulator]:
    """A simulator that answers every request whole, streamed or not."""
    with BackgroundSimulator(SimulatorConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS,
                                             output_tokens=TOKENS, ignore_stream=True)) as sim:
        yield sim


@pytest.fixture(scope="module")
def stream_sim() -> Iterator[BackgroundSimulator]:
    with BackgroundSimulator(SimulatorConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS,
                                             output_tokens=TOKENS)) as sim:
        yield sim


async def run(client: HttpClients, sim: BackgroundSimulator, kind: ApiKind, *,
              via_httpx: bool = False, stream: bool = True, requests: int = 1,
              headers: dict[str, str] | None = None) -> RunResult:
    target = Target(base_url=sim.base_url, api_kind=kind, model="m", http2=via_httpx,
                    headers=headers or {})
    workload = Workload(audio_s=1.0, stream=stream) if kind is ApiKind.OPENAI_TRANSCRIPTIONS \
        else Workload(stream=stream, input_tokens=16)
    profile = SingleProfile() if requests == 1 else \
        ConcurrencyProfile(users=2, max_requests=requests)
    return await execute(client, target, workload, profile)


@pytest.mark.parametrize("kind", [ApiKind.OPENAI_CHAT, ApiKind.OPENAI_TRANSCRIPTIONS])
async def test_a_streamed_request_answered_as_json_is_a_success_with_ttft_equal_to_e2e(
        client: HttpClients, whole_sim: BackgroundSimulator, via_httpx: bool,
        kind: ApiKind) -> None:
    result = await run(client, whole_sim, kind, via_httpx=via_httpx)
    (sample,) = result.samples
    m = sample.measurement
    assert m.error_class is None, m.error_detail
    assert m.streamed is False
    assert m.ttft_ms == m.e2e_ms
    assert m.e2e_ms >= TTFT_MS + (TOKENS - 1) * ITL_MS
    assert m.itl_ms == ()
    assert (m.output_tokens, m.tokens_server_counted) == (TOKENS, True)
    assert result.summary.not_streamed == 1


async def test_a_run_counts_the_requests_answered_whole_and_shows_them(
        client: HttpClients, whole_sim: BackgroundSimulator) -> None:
    result = await run(client, whole_sim, ApiKind.OPENAI_CHAT, requests=6)
    assert result.summary.successes == 6
    assert result.summary.not_streamed == 6
    assert result.report().not_streamed == 6
    assert "answered whole, not streamed (TTFT = E2E)" in rendered(summary_table(result.summary))


async def test_a_stream_answered_as_a_stream_is_marked_streamed_and_not_counted(
        client: HttpClients, stream_sim: BackgroundSimulator, via_httpx: bool) -> None:
    result = await run(client, stream_sim, ApiKind.OPENAI_CHAT, via_httpx=via_httpx)
    (sample,) = result.samples
    assert sample.measurement.error_class is None
    assert sample.measurement.streamed is True
    assert result.summary.not_streamed == 0
    assert "not streamed" not in rendered(summary_table(result.summary))


async def test_a_request_not_asked_to_stream_is_neither(
        client: HttpClients, whole_sim: BackgroundSimulator, via_httpx: bool) -> None:
    result = await run(client, whole_sim, ApiKind.OPENAI_CHAT, via_httpx=via_httpx,
                       stream=False)
    (sample,) = result.samples
    assert sample.measurement.error_class is None
    assert sample.measurement.streamed is None
    assert sample.measurement.ttft_ms is None
    assert result.summary.not_streamed == 0


async def test_a_streamed_answer_neither_sse_nor_json_is_still_a_protocol_error(
        client: HttpClients, stream_sim: BackgroundSimulator, via_httpx: bool) -> None:
    result = await run(client, stream_sim, ApiKind.OPENAI_CHAT, via_httpx=via_httpx,
                       headers={FAULT_HEADER: Fault.WRONG_CONTENT_TYPE.value})
    (sample,) = result.samples
    assert sample.measurement.error_class is ErrorClass.PROTOCOL
    assert result.summary.not_streamed == 0
