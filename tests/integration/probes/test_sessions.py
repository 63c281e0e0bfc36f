"""Multi-turn sessions against the simulator: the example file's 3 conversations
of 3 turns complete with their history growing every turn, the agent's tool call round-trips
(the simulator refuses a tool result that answers no call it made), and later turns reuse
their own history from the prefix cache while no conversation reuses another's."""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import ConcurrencyProfile, ConstantProfile, LoadProfile
from sustain.probes.measure.sample import Sample
from sustain.probes.protocols.registry import CONVERSATION_KINDS
from sustain.probes.run_result import RunResult
from sustain.probes.runner import execute
from sustain.probes.workers.pool import WorkerPool
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload
from tests.conftest import SimulatorHandle

EXAMPLE = str(Path(__file__).parents[3] / "examples" / "sessions" / "agentic.jsonl")
ANYWHERE = DatasetPolicy.unrestricted()


def target(server: SimulatorHandle, api: ApiKind = ApiKind.OPENAI_CHAT) -> Target:
    return Target(base_url=server.base_url, api_kind=api, model="m")


async def play(server: SimulatorHandle, profile: LoadProfile | None = None,
               api: ApiKind = ApiKind.OPENAI_CHAT, **workload: Any) -> RunResult:
    async with HttpClients() as clients:
        return await execute(clients, target(server, api), Workload(**workload),
                             profile or ConcurrencyProfile(users=3, duration_s=60),
                             datasets=ANYWHERE)


def by_conversation(samples: list[Sample]) -> dict[str, list[Sample]]:
    grouped: dict[str, list[Sample]] = defaultdict(list)
    for sample in sorted(samples, key=lambda s: (s.conversation or "", s.turn or 0)):
        grouped[sample.conversation or ""].append(sample)
    return grouped


def check_complete(result: RunResult) -> None:
    sessions = result.summary.sessions
    assert sessions is not None
    assert sessions.model_dump() == {"conversations": 3, "completed": 3, "turns": 9,
                                     "failed_turns": 0}
    conversations = by_conversation(result.samples)
    assert set(conversations) == {"support", "agent", "chat"}
    for turns in conversations.values():
        assert [s.turn for s in turns] == [0, 1, 2]
        inputs = [s.measurement.input_tokens or 0 for s in turns]
        assert inputs == sorted(set(inputs)), f"history must grow every turn: {inputs}"
        assert [s.session_end for s in turns] == [False, False, True]
    agent = conversations["agent"]
    assert agent[0].measurement.tool_call_ms is not None  # the simulator called the tool
    assert agent[0].measurement.ttft_ms is not None
    assert agent[0].measurement.tool_call_ms == agent[0].measurement.ttft_ms
    assert agent[1].measurement.tool_call_ms is None  # answered the tool's result in text
    by_index = result.summary.turns_by_index
    assert by_index is not None
    assert [row.turn for row in by_index] == [0, 1, 2]
    means = [row.input_tokens_mean or 0.0 for row in by_index]
    assert means == sorted(means)
    assert means[0] < means[2]
    assert result.summary.tool_call_ms is not None
    assert result.summary.tool_call_ms.count == 1
    assert (result.summary.e2e_interactivity or 0.0) > 0


@pytest.mark.parametrize("api", sorted(CONVERSATION_KINDS))
async def test_a_sessions_file_completes_with_growing_history_and_tool_round_trips(
        simulator: SimulatorHandle, api: ApiKind) -> None:
    """Over every conversation protocol: the simulator checks each one's history (a tool
    result answers a call it made, Anthropic's roles alternate) and refuses a bad one."""
    result = await play(simulator, api=api, sessions=EXAMPLE)
    check_complete(result)
    assert result.stopped is None
    assert all(s.measurement.reply is None for s in result.samples)  # no text kept


async def test_later_turns_reuse_their_own_history_and_no_run_reuses_another(
        simulator: SimulatorHandle) -> None:
    for _ in range(2):
        result = await play(simulator, sessions=EXAMPLE)
        for turns in by_conversation(result.samples).values():
            first, _, last = turns
            assert first.measurement.cached_tokens == 0, "a salted first turn is never cached"
            # the simulator caches whole 16-token blocks of each prompt and its reply
            assert (last.measurement.cached_tokens or 0) >= 16


async def test_sessions_spread_over_two_workers_play_every_conversation_once(
        simulator: SimulatorHandle) -> None:
    async with WorkerPool(2) as pool:
        result = await pool.measure(target(simulator), Workload(sessions=EXAMPLE),
                                    ConcurrencyProfile(users=2, duration_s=60, workers=2),
                                    datasets=ANYWHERE)
    check_complete(result)


async def test_synthetic_sessions_stop_at_the_turn_cap_with_history_growing(
        simulator: SimulatorHandle) -> None:
    result = await play(simulator, ConcurrencyProfile(users=2, max_requests=6),
                        turns=3, input_tokens=20, max_tokens=8)
    sessions = result.summary.sessions
    assert sessions is not None
    assert sessions.turns == 6
    assert sessions.completed == 2
    for turns in by_conversation(result.samples).values():
        inputs = [s.measurement.input_tokens or 0 for s in turns]
        # each turn adds 20 words and the previous reply's 8 tokens
        assert all(later - earlier == 28 for earlier, later in itertools.pairwise(inputs))


async def test_sessions_need_a_chat_endpoint_and_a_closed_loop(
        simulator: SimulatorHandle) -> None:
    async with HttpClients() as clients:
        with pytest.raises(ValueError, match="chat endpoint"):
            await execute(clients, target(simulator, ApiKind.OPENAI_COMPLETIONS),
                          Workload(turns=2), ConcurrencyProfile(users=1, max_requests=2))
        with pytest.raises(ValueError, match="concurrency"):
            await execute(clients, target(simulator), Workload(turns=2),
                          ConstantProfile(rate=1, duration_s=1))
