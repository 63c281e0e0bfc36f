"""`input_tokens` means the server's tokens: against a simulator that counts prompts as a
BPE tokenizer and a chat template would (each word ceil(length / 3) tokens, about 1.8 for
the synthetic vocabulary and 6 for the salt, plus 20 for the template), a run first fits
that count with two requests that are no samples, then serves every synthetic prompt within
5 % of the length it asked for, and its summary says what was asked and what was served."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.calibrate import FITS, REQUEST_ID_PREFIX
from sustain.probes.load.profiles import ConcurrencyProfile, parse_profile
from sustain.probes.measure.sample import Sample
from sustain.probes.runner import execute
from sustain.probes.workers.pool import WorkerPool
from sustain.probes.workload.lengths import UniformLength
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.spec import Workload
from sustain.simulator.completion import prompt_token_count, prompt_words
from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator

CHARS_PER_TOKEN = 3.0
TEMPLATE_TOKENS = 20
VOCABULARY_TOKENS_PER_WORD = 57 / 32
"""The simulator's count of the synthetic vocabulary: its 32 words take 57 tokens."""
KINDS = [ApiKind.OPENAI_CHAT, ApiKind.OPENAI_COMPLETIONS, ApiKind.OPENAI_RESPONSES,
         ApiKind.ANTHROPIC_MESSAGES]


@pytest.fixture
def truth(tmp_path: Path) -> Path:
    return tmp_path / "truth.jsonl"


@pytest.fixture
def bpe(truth: Path) -> Iterator[BackgroundSimulator]:
    """A fresh simulator (its own port: no fit of an earlier test applies) that counts
    prompts as a subword tokenizer under a chat template, and logs every request."""
    FITS.clear()
    config = SimulatorConfig(ttft_ms=1.0, itl_ms=0.0, output_tokens=2,
                             prompt_chars_per_token=CHARS_PER_TOKEN,
                             chat_template_tokens=TEMPLATE_TOKENS, truth_log=str(truth))
    with BackgroundSimulator(config) as server:
        yield server
    FITS.clear()


def target(sim: BackgroundSimulator, kind: ApiKind = ApiKind.OPENAI_CHAT) -> Target:
    return Target(base_url=sim.base_url, api_kind=kind, model="m")


def served(samples: list[Sample]) -> list[tuple[int, int]]:
    """(requested, served) prompt tokens of each sample."""
    pairs = []
    for sample in samples:
        m = sample.measurement
        assert m.error_class is None, m.error_detail
        assert m.prompt_tokens_requested is not None
        assert m.input_tokens is not None
        pairs.append((m.prompt_tokens_requested, m.input_tokens))
    return pairs


async def logged(truth: Path, answered: int) -> tuple[int, int]:
    """Requests the simulator answered, and the calibration requests among them, once it
    has logged `answered` (it logs a request after its last byte, which the client may have
    read first), or after a second."""
    for _ in range(40):
        lines = (await asyncio.to_thread(truth.read_text)).splitlines()
        if len(lines) >= answered:
            break
        await asyncio.sleep(0.025)
    return len(lines), sum(1 for line in lines if str(
        json.loads(line)["request_id"] or "").startswith(REQUEST_ID_PREFIX))


@pytest.mark.parametrize("kind", KINDS, ids=[kind.value for kind in KINDS])
async def test_synthetic_prompt_is_served_within_five_percent_of_input_tokens(
        client: HttpClients, bpe: BackgroundSimulator, kind: ApiKind) -> None:
    workload = Workload(input_tokens=330, max_tokens=2)
    result = await execute(client, target(bpe, kind), workload,
                           ConcurrencyProfile(users=2, max_requests=20))
    summary = result.summary
    assert summary.attempts == summary.successes == 20  # the calibration requests are none
    calibration = summary.prompt_calibration
    assert calibration is not None
    assert calibration.method == "server"
    assert calibration.tokens_per_word == pytest.approx(VOCABULARY_TOKENS_PER_WORD)
    salt = 6  # "s" and 16 hex digits: 17 characters
    template = 0 if kind is ApiKind.OPENAI_COMPLETIONS else TEMPLATE_TOKENS
    assert calibration.overhead_tokens == pytest.approx(salt + template)
    assert calibration.note is None
    assert summary.prompt_tokens_requested == 330
    assert summary.prompt_tokens_served == pytest.approx(330, rel=0.05)
    assert summary.prompt_tokens_ratio == pytest.approx(1.0, abs=0.05)
    for requested, count in served(result.samples):
        assert count == pytest.approx(requested, rel=0.05)  # each request, not only the mean
    # Counted in words, as before calibration, the same request was 1.7 times as long.
    body = RequestBuilder(workload, kind, "m").body(0)
    uncalibrated = prompt_token_count(prompt_words(body), CHARS_PER_TOKEN) + template
    assert uncalibrated > 1.7 * 330
    report = result.report()
    assert report.prompt_calibration == calibration
    assert report.stages[0].summary.prompt_tokens_requested == 330


async def test_an_input_length_distribution_is_served_at_the_lengths_it_draws(
        client: HttpClients, bpe: BackgroundSimulator) -> None:
    workload = Workload(input_length=UniformLength(min=100, max=1500), max_tokens=2, seed=4)
    result = await execute(client, target(bpe), workload,
                           ConcurrencyProfile(users=2, max_requests=30))
    pairs = served(result.samples)
    assert len({requested for requested, _ in pairs}) > 20
    for requested, count in pairs:
        assert count == pytest.approx(requested, rel=0.05)
    assert result.summary.prompt_tokens_ratio == pytest.approx(1.0, abs=0.05)


async def test_a_second_run_reuses_the_fit_and_sends_only_its_samples(
        client: HttpClients, bpe: BackgroundSimulator, truth: Path) -> None:
    workload = Workload(input_tokens=200, max_tokens=2)
    first = await execute(client, target(bpe), workload, ConcurrencyProfile(
        users=1, max_requests=5))
    assert await logged(truth, 2 + 5) == (2 + 5, 2)
    second = await execute(client, target(bpe), Workload(input_tokens=700, max_tokens=2),
                           ConcurrencyProfile(users=1, max_requests=5))
    assert await logged(truth, 2 + 10) == (2 + 10, 2)
    assert second.summary.prompt_calibration is not None
    assert second.summary.prompt_calibration.reused
    assert first.summary.prompt_calibration is not None
    assert not first.summary.prompt_calibration.reused
    assert second.summary.prompt_tokens_served == pytest.approx(700, rel=0.05)


async def test_prompts_shorter_than_the_template_are_served_longer_with_a_note(
        client: HttpClients, bpe: BackgroundSimulator) -> None:
    result = await execute(client, target(bpe), Workload(input_tokens=16, max_tokens=2),
                           ConcurrencyProfile(users=1, max_requests=3))
    calibration = result.summary.prompt_calibration
    assert calibration is not None
    assert calibration.note is not None
    assert "served longer than asked" in calibration.note
    assert result.summary.prompt_tokens_ratio is not None
    assert result.summary.prompt_tokens_ratio > 1.5


async def test_a_run_of_given_text_asks_for_no_length(
        client: HttpClients, bpe: BackgroundSimulator, truth: Path) -> None:
    result = await execute(client, target(bpe), Workload(prompt="say hello", max_tokens=2),
                           ConcurrencyProfile(users=1, max_requests=2))
    assert result.summary.prompt_calibration is None
    assert result.summary.prompt_tokens_requested is None
    assert result.summary.input_tokens is not None  # the server's count, as ever
    assert await logged(truth, 2) == (2, 0)


async def test_worker_processes_calibrate_once_and_share_the_fit(
        bpe: BackgroundSimulator, truth: Path) -> None:
    profile = parse_profile({"kind": "concurrency", "users": 4, "max_requests": 24,
                             "workers": 2})
    async with WorkerPool(2) as pool:
        result = await pool.measure(target(bpe), Workload(input_tokens=400, max_tokens=2),
                                    profile)
    assert result.summary.attempts == 24
    assert await logged(truth, 2 + 24) == (2 + 24, 2)
    calibration = result.summary.prompt_calibration
    assert calibration is not None
    assert calibration.method == "server"
    assert result.summary.prompt_tokens_ratio == pytest.approx(1.0, abs=0.05)
    for requested, count in served(result.samples):
        assert count == pytest.approx(requested, rel=0.05)
