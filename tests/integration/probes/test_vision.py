"""Vision inputs against the simulator over real loopback HTTP, in every chat protocol: the
images reach the server (its usage counts their tokens, one per 28 x 28 patch), their prefill
is in the TTFT, and a run reports TTFT by image size."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import ConcurrencyProfile
from sustain.probes.run_result import RunResult
from sustain.probes.runner import execute
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator

TTFT_MS = 10.0
PREFILL_MS_PER_TOKEN = 0.2
INPUT_TOKENS = 12
KINDS = [ApiKind.OPENAI_CHAT, ApiKind.OPENAI_RESPONSES, ApiKind.ANTHROPIC_MESSAGES]


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundSimulator]:
    config = SimulatorConfig(ttft_ms=TTFT_MS, itl_ms=1.0, output_tokens=4,
                             prefill_ms_per_token=PREFILL_MS_PER_TOKEN)
    with BackgroundSimulator(config) as server:
        yield server


def patches(side: int) -> int:
    return math.ceil(side / 28) ** 2


async def run(client: HttpClients, sim: BackgroundSimulator, kind: ApiKind, side: int,
              count: int = 1) -> RunResult:
    target = Target(base_url=sim.base_url, api_kind=kind, model="m")
    workload = Workload.model_validate({
        "input_tokens": INPUT_TOKENS, "max_tokens": 4,
        "images": {"count": count, "width": side, "height": side}})
    return await execute(client, target, workload,
                         ConcurrencyProfile(users=1, max_requests=3))


@pytest.mark.parametrize("kind", KINDS, ids=[k.value for k in KINDS])
async def test_the_server_counts_every_image_in_every_chat_protocol(
        client: HttpClients, sim: BackgroundSimulator, kind: ApiKind) -> None:
    result = await run(client, sim, kind, side=100, count=2)
    assert result.summary.successes == 3
    for sample in result.samples:
        assert sample.measurement.input_tokens == INPUT_TOKENS + 2 * patches(100)
        assert sample.measurement.image_size == "100x100"


async def test_a_run_reports_ttft_by_image_size_and_bigger_images_cost_more(
        client: HttpClients, sim: BackgroundSimulator) -> None:
    small = (await run(client, sim, ApiKind.OPENAI_CHAT, side=56)).summary
    large = (await run(client, sim, ApiKind.OPENAI_CHAT, side=1120)).summary
    assert small.ttft_by_image_size is not None
    assert large.ttft_by_image_size is not None
    assert list(small.ttft_by_image_size) == ["56x56"]
    assert list(large.ttft_by_image_size) == ["1120x1120"]
    small_ttft = small.ttft_by_image_size["56x56"].p50
    large_ttft = large.ttft_by_image_size["1120x1120"].p50
    assert small_ttft is not None
    assert large_ttft is not None
    # the simulator's own prefill (1,600 patches at 0.2 ms each), whatever the machine does
    assert small_ttft >= TTFT_MS + PREFILL_MS_PER_TOKEN * (INPUT_TOKENS + patches(56))
    assert large_ttft >= TTFT_MS + PREFILL_MS_PER_TOKEN * (INPUT_TOKENS + patches(1120))


@pytest.mark.parametrize("kind", KINDS, ids=[k.value for k in KINDS])
async def test_a_datasets_own_images_reach_the_server_in_every_chat_protocol(
        client: HttpClients, sim: BackgroundSimulator, kind: ApiKind, tmp_path: Path) -> None:
    Image.new("RGB", (100, 60), (200, 30, 30)).save(tmp_path / "wide.jpg", format="JPEG")
    Image.new("RGB", (56, 56), (30, 200, 30)).save(tmp_path / "small.png", format="PNG")
    (tmp_path / "lines.jsonl").write_text(json.dumps(
        {"prompt": "one two three", "images": ["wide.jpg", "small.png"]}) + "\n")
    target = Target(base_url=sim.base_url, api_kind=kind, model="m")
    result = await execute(client, target,
                           Workload(dataset=str(tmp_path / "lines.jsonl"), max_tokens=4),
                           ConcurrencyProfile(users=1, max_requests=2),
                           datasets=DatasetPolicy(directory=tmp_path))
    assert result.summary.successes == 2
    for sample in result.samples:
        m = sample.measurement
        assert m.image_size == "56x56+100x60"
        assert m.input_tokens is not None
        # the salt and three words, then 4 x 3 patches and 2 x 2 patches
        assert m.input_tokens == 4 + math.ceil(100 / 28) * math.ceil(60 / 28) + patches(56)
    assert result.summary.ttft_by_image_size is not None
    assert list(result.summary.ttft_by_image_size) == ["56x56+100x60"]
