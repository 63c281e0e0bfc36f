"""The protocols against a real third-party server: LiteLLM's proxy, which implements the
Responses and Anthropic Messages protocols itself (translating them to an OpenAI chat backend,
here the simulator), and serves embeddings, rerank and transcriptions in its own shapes (its
rerank answers as Cohere does; it parses the multipart audio form itself and validates the
transcription usage against OpenAI's schema). It does not stream transcriptions (it answers a
`stream=true` form with the backend's stream as one JSON text), so streamed transcriptions are
checked against the simulator only. Its events and bodies are LiteLLM's own encoding, not the
simulator's, so these tests show the probe reads each protocol as another implementation
writes it: every request succeeds, streamed ones with TTFT and ITL, and the server's usage is
read.

LiteLLM runs in a virtual environment of its own (its pins clash with sustain's): set
SUSTAIN_TEST_LITELLM to its `litellm` program, or put it on PATH; .ci/run installs it."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.secret_policy import SecretPolicy
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import ConcurrencyProfile, SingleProfile
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.runner import execute
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator
from tests.processes import SustainProcess, free_port
from tests.tools import require_tool

TTFT_MS = 40.0
ITL_MS = 5.0
TOKENS = 12
"""The simulator's answer: 12 tokens, whatever cap LiteLLM passes on."""
REASONING = 5
"""The thinking model's reasoning tokens before its answer."""
KIND_IDS = ["openai-responses", "anthropic-messages", "openai-chat"]


class Proxy:
    def __init__(self, base_url: str, key: str) -> None:
        self.base_url = base_url
        self.key = key


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    litellm = require_tool("litellm", "pip install 'litellm[proxy]==1.108.7' in a virtual "
                           "environment of its own", env="SUSTAIN_TEST_LITELLM")
    here = tmp_path_factory.mktemp("litellm")
    config = SimulatorConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS, output_tokens=TOKENS)
    thinking = SimulatorConfig(ttft_ms=TTFT_MS, itl_ms=ITL_MS, output_tokens=TOKENS,
                               reasoning_tokens=REASONING)
    with BackgroundSimulator(config) as sim, BackgroundSimulator(thinking) as thinker:
        (here / "config.yaml").write_text(
            "model_list:\n"
            "  - model_name: sim\n"
            "    litellm_params:\n"
            "      model: openai/sim-model\n"
            f"      api_base: {sim.base_url}\n"
            "      api_key: unused\n"
            "  - model_name: sim-thinking\n"
            "    litellm_params:\n"
            "      model: hosted_vllm/sim-model\n"
            f"      api_base: {thinker.base_url}\n"
            "      api_key: unused\n"
            "  - model_name: sim-rerank\n"
            "    litellm_params:\n"
            "      model: hosted_vllm/sim-model\n"
            f"      api_base: {sim.base_url}\n"
            "      api_key: unused\n")
        port = free_port()
        key = f"sk-{secrets.token_hex(24)}"
        with SustainProcess(["--config", str(here / "config.yaml"), "--host", "127.0.0.1",
                             "--port", str(port)], here / "litellm.log",
                            env={"LITELLM_MASTER_KEY": key, "LITELLM_LOG": "ERROR",
                                 "LITELLM_TELEMETRY": "False", "NO_DOCS": "True"},
                            program=[litellm]) as process:
            process.wait_http(f"http://127.0.0.1:{port}/health/liveliness", timeout_s=180)
            yield Proxy(f"http://127.0.0.1:{port}/v1", key)


async def one(proxy: Proxy, kind: ApiKind, *, stream: bool = False, key: str | None = None,
              via_httpx: bool = False, model: str = "sim", **workload: object) -> Measurement:
    target = Target(base_url=proxy.base_url, api_kind=kind, model=model, http2=via_httpx,
                    auth_secret_ref="env:LITELLM_TEST_KEY")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LITELLM_TEST_KEY", key or proxy.key)
        async with HttpClients() as clients:
            result = await execute(clients, target, Workload.model_validate(
                {"max_tokens": 64, "stream": stream, **workload}), SingleProfile(),
                secrets=SecretPolicy(env_globs=("LITELLM_TEST_KEY",)))
    (sample,) = result.samples
    return sample.measurement


@pytest.mark.parametrize("kind", [ApiKind(k) for k in KIND_IDS], ids=KIND_IDS)
@pytest.mark.parametrize("via_httpx", [False, True], ids=["lean-http1", "httpx"])
async def test_a_stream_through_litellm_is_timed_token_by_token(
        proxy: Proxy, kind: ApiKind, via_httpx: bool) -> None:
    m = await one(proxy, kind, stream=True, via_httpx=via_httpx)
    assert m.error_class is None, m.error_detail
    assert (m.output_tokens, m.tokens_server_counted) == (TOKENS, True)
    assert m.input_tokens is not None
    assert m.input_tokens > 0
    assert m.ttft_ms is not None
    assert m.ttft_ms >= TTFT_MS  # the simulator's first token, behind the proxy
    assert len(m.itl_ms) == TOKENS - 1
    # the simulator's whole generation, at least (the proxy may hold events back and
    # deliver them together: the gaps are what reached the client)
    assert m.e2e_ms >= TTFT_MS + (TOKENS - 1) * ITL_MS


@pytest.mark.parametrize("kind", [ApiKind(k) for k in KIND_IDS], ids=KIND_IDS)
async def test_a_thinking_models_stream_through_litellm_tells_its_first_answer(
        proxy: Proxy, kind: ApiKind) -> None:
    """LiteLLM passes the backend's `reasoning_content` on as each protocol spells thinking
    (Responses reasoning deltas, Anthropic `thinking_delta` blocks): TTFT is the first
    thought, TTFO the first answer token, and the thinking is counted."""
    m = await one(proxy, kind, stream=True, model="sim-thinking")
    assert m.error_class is None, m.error_detail
    assert m.ttft_ms is not None
    assert m.ttfo_ms is not None
    assert m.ttft_ms >= TTFT_MS
    assert m.ttfo_ms >= TTFT_MS + REASONING * ITL_MS
    assert m.reasoning_tokens == REASONING
    assert m.answer_tokens == TOKENS


@pytest.mark.parametrize("kind", [ApiKind(k) for k in KIND_IDS], ids=KIND_IDS)
async def test_a_whole_answer_through_litellm_counts_the_servers_usage(
        proxy: Proxy, kind: ApiKind) -> None:
    m = await one(proxy, kind, stream=False)
    assert m.error_class is None, m.error_detail
    assert (m.output_tokens, m.tokens_server_counted) == (TOKENS, True)
    assert m.e2e_ms >= TTFT_MS + (TOKENS - 1) * ITL_MS


@pytest.mark.parametrize("kind", [ApiKind(k) for k in KIND_IDS], ids=KIND_IDS)
async def test_a_key_litellm_refuses_is_a_client_error(proxy: Proxy, kind: ApiKind) -> None:
    m = await one(proxy, kind, stream=True, key="sk-not-the-key")
    assert m.error_class is ErrorClass.HTTP_4XX
    assert m.ttft_ms is None



async def test_embeddings_through_litellm_are_checked_and_counted(proxy: Proxy) -> None:
    m = await one(proxy, ApiKind.OPENAI_EMBEDDINGS, batch_size=5, input_tokens=7,
                  dimensions=64)
    assert m.error_class is None, m.error_detail
    assert m.items == 5
    assert m.input_tokens == 5 * 7  # the simulator's count, passed on
    assert m.e2e_ms >= TTFT_MS


async def test_a_vector_length_litellm_does_not_give_is_a_protocol_failure(proxy: Proxy
                                                                          ) -> None:
    m = await one(proxy, ApiKind.OPENAI_EMBEDDINGS, batch_size=2, dimensions=65)
    assert m.error_class is ErrorClass.PROTOCOL


async def test_rerank_through_litellm_reads_its_cohere_shaped_answer(proxy: Proxy) -> None:
    m = await one(proxy, ApiKind.RERANK, model="sim-rerank", documents=6, input_tokens=5,
                  query_tokens=3)
    assert m.error_class is None, m.error_detail
    assert m.items == 6
    assert m.input_tokens == 6 * 5 + 3 + 1  # documents, query and its salt, one per word


async def test_a_whole_transcription_through_litellm_counts_audio_and_usage(proxy: Proxy
                                                                           ) -> None:
    m = await one(proxy, ApiKind.OPENAI_TRANSCRIPTIONS, audio_seconds=1.5)
    assert m.error_class is None, m.error_detail
    assert m.audio_s == 1.5
    assert (m.output_tokens, m.tokens_server_counted) == (TOKENS, True)
    assert m.input_tokens == 15  # the simulator's 10 audio tokens a second, passed on
    assert m.rtf is not None
    assert m.rtf >= TTFT_MS / 1000 / 1.5


@pytest.mark.parametrize("kind", [ApiKind(k) for k in KIND_IDS[:3]], ids=KIND_IDS[:3])
async def test_images_reach_the_model_through_litellm(proxy: Proxy, kind: ApiKind) -> None:
    """LiteLLM converts each protocol's image parts to chat ones for the backend, whose usage
    then counts them (one token per 28 x 28 patch)."""
    m = await one(proxy, kind, stream=True, input_tokens=6,
                  images={"count": 2, "width": 56, "height": 56})
    assert m.error_class is None, m.error_detail
    assert m.image_size == "56x56"
    assert m.input_tokens is not None
    assert m.input_tokens >= 6 + 2 * 4


SESSIONS = str(Path(__file__).parents[3] / "examples" / "sessions" / "agentic.jsonl")


@pytest.mark.parametrize("kind", [ApiKind(k) for k in KIND_IDS], ids=KIND_IDS)
async def test_sessions_with_a_tool_round_trip_through_litellm(proxy: Proxy,
                                                               kind: ApiKind) -> None:
    """LiteLLM translates each protocol's history (Responses `function_call` and
    `function_call_output` items, Anthropic `tool_use` and `tool_result` blocks) into the
    chat history the simulator checks: a tool result that answers no call it made, or a
    call left unanswered, fails the turn."""
    target = Target(base_url=proxy.base_url, api_kind=kind, model="sim",
                    auth_secret_ref="env:LITELLM_TEST_KEY")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LITELLM_TEST_KEY", proxy.key)
        async with HttpClients() as clients:
            result = await execute(clients, target, Workload(sessions=SESSIONS),
                                   ConcurrencyProfile(users=3, duration_s=60),
                                   secrets=SecretPolicy(env_globs=("LITELLM_TEST_KEY",)),
                                   datasets=DatasetPolicy.unrestricted())
    failures = [s.measurement.error_detail for s in result.samples
                if s.measurement.error_class is not None]
    assert failures == []
    assert result.summary.sessions is not None
    assert result.summary.sessions.completed == 3
    agent = sorted((s for s in result.samples if s.conversation == "agent"),
                   key=lambda s: s.turn or 0)
    assert agent[0].measurement.tool_call_ms is not None, "the simulator called the tool"
    assert agent[1].measurement.tool_call_ms is None, "and answered its result in text"
