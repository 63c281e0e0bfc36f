"""Every generation protocol against the simulator over real loopback HTTP, through both
client paths: the OpenAI Responses and Anthropic Messages kinds measure what chat measures
(TTFT, ITL, E2E, server-counted tokens, cached input) and classify the same faults the same
way, each from its own events; each sends its key the way its protocol takes it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.secret_policy import SecretPolicy
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import SingleProfile
from sustain.probes.measure.sample import ErrorClass, Sample
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import FAULT_HEADER, Fault, SimulatorConfig
from sustain.simulator.server import BackgroundSimulator

TTFT_MS = 30.0
ITL_MS = 5.0
MAX_TOKENS = 12
"""Fewer than the simulator's 32 tokens: a normal answer ends at the cap."""
INPUT_TOKENS = 40
KEY = "sim-key-for-kinds"
KINDS = [ApiKind.OPENAI_CHAT, ApiKind.OPENAI_RESPONSES, ApiKind.ANTHROPIC_MESSAGES]


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundSimulator]:
    config = SimulatorConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS, output_tokens=32, api_key=KEY)
    with BackgroundSimulator(config) as server:
        yield server


@pytest.fixture(params=KINDS, ids=[kind.value for kind in KINDS])
def kind(request: pytest.FixtureRequest) -> ApiKind:
    return ApiKind(request.param)


async def one(client: HttpClients, sim: BackgroundSimulator, kind: ApiKind, via_httpx: bool,
              fault: Fault | None = None, *, stream: bool = True,
              cache: str = "defeat", key: str = KEY) -> Sample:
    target = Target(base_url=sim.base_url, api_kind=kind, model="m", http2=via_httpx,
                    headers={FAULT_HEADER: fault.value} if fault else {},
                    auth_secret_ref="env:KINDS_TEST_KEY")
    workload = Workload(max_tokens=MAX_TOKENS, input_tokens=INPUT_TOKENS, stream=stream,
                        cache=cache)  # type: ignore[arg-type]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KINDS_TEST_KEY", key)
        result = await execute(client, target, workload, SingleProfile(),
                               secrets=SecretPolicy(env_globs=("KINDS_TEST_KEY",)))
    (sample,) = result.samples
    return sample


async def test_a_stream_is_timed_token_by_token_with_the_servers_usage(
        client: HttpClients, sim: BackgroundSimulator, kind: ApiKind, via_httpx: bool) -> None:
    m = (await one(client, sim, kind, via_httpx)).measurement
    assert m.error_class is None, m.error_detail
    assert (m.output_tokens, m.tokens_server_counted) == (MAX_TOKENS, True)
    assert m.input_tokens == INPUT_TOKENS
    assert m.ttft_ms is not None
    assert m.ttft_ms >= TTFT_MS
    assert len(m.itl_ms) == MAX_TOKENS - 1
    assert m.e2e_ms >= TTFT_MS + (MAX_TOKENS - 1) * ITL_MS


async def test_a_whole_answer_is_timed_end_to_end_with_the_servers_usage(
        client: HttpClients, sim: BackgroundSimulator, kind: ApiKind, via_httpx: bool) -> None:
    m = (await one(client, sim, kind, via_httpx, stream=False)).measurement
    assert m.error_class is None, m.error_detail
    assert (m.output_tokens, m.tokens_server_counted, m.input_tokens) == \
        (MAX_TOKENS, True, INPUT_TOKENS)
    assert m.ttft_ms is None
    assert m.e2e_ms >= TTFT_MS + (MAX_TOKENS - 1) * ITL_MS


async def test_cached_input_is_read_from_each_protocols_usage(
        client: HttpClients, sim: BackgroundSimulator, kind: ApiKind) -> None:
    """With the cache allowed the same prompt comes twice: the second is served from the
    simulator's prefix cache, and each protocol reports it its own way."""
    await one(client, sim, kind, False, cache="allow")
    m = (await one(client, sim, kind, False, cache="allow")).measurement
    assert m.error_class is None
    assert m.input_tokens == INPUT_TOKENS
    assert m.cached_tokens is not None
    assert m.cached_tokens > 0


@pytest.mark.parametrize(("fault", "expected"), [
    (Fault.ERROR_EVENT, ErrorClass.HTTP_5XX),
    (Fault.TRUNCATE, ErrorClass.TRUNCATED),
    (Fault.MALFORMED, ErrorClass.PROTOCOL),
    (Fault.ZERO_TOKENS, ErrorClass.EMPTY),
    (Fault.USAGE_ONLY, ErrorClass.EMPTY),
    (Fault.HTTP_429, ErrorClass.HTTP_429),
    (Fault.HTTP_500, ErrorClass.HTTP_5XX),
    (Fault.WRONG_CONTENT_TYPE, ErrorClass.PROTOCOL),
])
async def test_a_fault_is_classified_alike_in_every_protocol(
        client: HttpClients, sim: BackgroundSimulator, kind: ApiKind, via_httpx: bool,
        fault: Fault, expected: ErrorClass) -> None:
    m = (await one(client, sim, kind, via_httpx, fault)).measurement
    assert m.error_class is expected, m.error_detail


async def test_a_stream_in_one_write_succeeds_with_zero_gaps(
        client: HttpClients, sim: BackgroundSimulator, kind: ApiKind) -> None:
    m = (await one(client, sim, kind, False, Fault.ONE_WRITE)).measurement
    assert m.error_class is None
    assert m.itl_ms == (0.0,) * (MAX_TOKENS - 1)


async def test_a_wrong_key_is_refused_in_the_protocols_own_header(
        client: HttpClients, sim: BackgroundSimulator, kind: ApiKind) -> None:
    """The simulator takes the key only where the protocol puts it (a bearer token, or
    Anthropic's x-api-key): the right key succeeds above, a wrong one is refused here."""
    m = (await one(client, sim, kind, False, key="wrong")).measurement
    assert m.error_class is ErrorClass.HTTP_4XX
    assert m.http_status == 401
