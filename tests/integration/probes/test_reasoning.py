"""A reasoning model over real loopback HTTP: the simulator thinks `REASONING` tokens, ITL
apart, before its answer, in each protocol that streams thinking; at 8 concurrent users every
request is accounted for, each one's reasoning tokens are what the simulator sent, its TTFT is
the first thought and its TTFO the first answer token (never before the simulator's schedule
allows), through both client paths. (How close TTFO is to the simulator's own write times is
measured by benchmarks/accuracy.py --reasoning-tokens.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import ConcurrencyProfile
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator

TTFT_MS = 20.0
ITL_MS = 2.0
TOKENS = 6
REASONING = 10
REQUESTS = 32


@pytest.fixture(scope="module")
def thinking_sim() -> Iterator[BackgroundSimulator]:
    with BackgroundSimulator(SimulatorConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS,
                                             output_tokens=TOKENS,
                                             reasoning_tokens=REASONING)) as sim:
        yield sim


@pytest.mark.parametrize("kind", [ApiKind.OPENAI_CHAT, ApiKind.OPENAI_RESPONSES,
                                  ApiKind.ANTHROPIC_MESSAGES])
async def test_each_thinking_request_is_counted_with_its_reasoning_and_first_answer(
        client: HttpClients, thinking_sim: BackgroundSimulator, via_httpx: bool,
        kind: ApiKind) -> None:
    target = Target(base_url=thinking_sim.base_url, api_kind=kind, model="m", http2=via_httpx)
    result = await execute(client, target, Workload(input_tokens=16),
                           ConcurrencyProfile(users=8, max_requests=REQUESTS),
                           SloThresholds(ttfo_ms=60_000.0))
    summary = result.summary
    assert (summary.attempts, summary.successes) == (REQUESTS, REQUESTS)
    for sample in result.samples:
        m = sample.measurement
        assert m.reasoning_tokens == REASONING
        assert m.output_tokens == REASONING + TOKENS
        assert m.ttft_ms is not None
        assert m.ttfo_ms is not None
        assert m.ttft_ms >= TTFT_MS
        assert m.ttfo_ms >= TTFT_MS + REASONING * ITL_MS  # the answer's first token's deadline
        assert m.ttfo_ms >= m.ttft_ms  # equal when the thinking and answer came in one read
    assert summary.reasoning_tokens == REQUESTS * REASONING
    assert summary.answer_tokens == REQUESTS * TOKENS
    assert summary.reasoning_share == pytest.approx(REASONING / (REASONING + TOKENS))
    assert summary.ttfo_ms is not None
    assert summary.ttfo_ms.count == REQUESTS
    assert summary.answer_tpot_ms is not None
    assert summary.answer_tpot_ms.count == REQUESTS
    assert summary.good == REQUESTS  # a goodput threshold on TTFO is judged


async def test_a_ttfo_threshold_below_the_first_answers_schedule_fails_every_request(
        client: HttpClients, thinking_sim: BackgroundSimulator) -> None:
    target = Target(base_url=thinking_sim.base_url, api_kind=ApiKind.OPENAI_CHAT, model="m")
    # The first answer token is due TTFT + 10 gaps after arrival: no request can meet this.
    tight = SloThresholds(ttfo_ms=TTFT_MS + REASONING * ITL_MS - 1.0)
    result = await execute(client, target, Workload(input_tokens=16),
                           ConcurrencyProfile(users=2, max_requests=4), tight)
    assert (result.summary.successes, result.summary.good) == (4, 0)
