"""Image generation against the simulator over real loopback HTTP, through both client paths: a
whole answer is timed end to end and counted in images, a stream is timed from its first
partial image and counted in completed images, a run's items are images (per request and per
second), every request of a run at 8 users is accounted for, and each fault is classified."""

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

IMAGE_MS = 30.0
IMAGE_BYTES = 2 * 1024 * 1024
"""Each image's bytes: some 2.7 MiB of base64, past the 1 MiB a chat event may have."""


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundSimulator]:
    with BackgroundSimulator(SimulatorConfig(image_ms=IMAGE_MS,
                                             image_bytes=IMAGE_BYTES)) as server:
        yield server


async def run(client: HttpClients, sim: BackgroundSimulator, *, via_httpx: bool = False,
              fault: Fault | None = None, profile: object = None, **workload: object
              ) -> RunResult:
    target = Target(base_url=sim.base_url, api_kind=ApiKind.OPENAI_IMAGES, model="img-sim",
                    http2=via_httpx, headers={FAULT_HEADER: fault.value} if fault else {})
    return await execute(client, target, Workload(prompt="a lighthouse at dusk",
                                                  **workload),  # type: ignore[arg-type]
                         SingleProfile() if profile is None else profile)  # type: ignore[arg-type]


async def one(client: HttpClients, sim: BackgroundSimulator, **kwargs: object
              ) -> Measurement:
    (sample,) = (await run(client, sim, **kwargs)).samples  # type: ignore[arg-type]
    return sample.measurement


async def test_a_whole_answer_is_timed_end_to_end_and_counted_in_images(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool) -> None:
    m = await one(client, sim, via_httpx=via_httpx, stream=False, output_images=3)
    assert m.error_class is None, m.error_detail
    assert (m.items, m.ttft_ms, m.streamed) == (3, None, None)
    assert m.e2e_ms >= 3 * IMAGE_MS
    assert (m.output_tokens, m.tokens_server_counted) == (3 * 272, True)


async def test_a_stream_is_timed_from_its_first_partial_image(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool) -> None:
    m = await one(client, sim, via_httpx=via_httpx, output_images=2, partial_images=2)
    assert m.error_class is None, m.error_detail
    assert m.streamed is True
    assert m.items == 2
    assert m.ttft_ms is not None
    assert m.ttft_ms >= IMAGE_MS / 3  # the first of two partial images, a third in
    assert len(m.itl_ms) == 2 * 3 - 1  # two partial images and the image, twice
    assert m.e2e_ms >= 2 * IMAGE_MS


async def test_a_run_at_8_users_accounts_for_every_request_and_counts_images(
        client: HttpClients, sim: BackgroundSimulator, via_httpx: bool) -> None:
    result = await run(client, sim, via_httpx=via_httpx, partial_images=1, output_images=2,
                       profile=ConcurrencyProfile(users=8, max_requests=24))
    summary = result.summary
    assert summary.attempts == summary.successes + summary.failures == 24
    assert summary.successes == 24
    assert summary.items == 48
    assert summary.items_per_second is not None
    assert summary.items_per_second == pytest.approx(48 / summary.duration_s)
    assert summary.ttft_ms.count == 24


@pytest.mark.parametrize(("fault", "stream", "expected"), [
    (Fault.EMPTY, False, ErrorClass.EMPTY),
    (Fault.MALFORMED, False, ErrorClass.PROTOCOL),
    (Fault.TRUNCATE, False, ErrorClass.TRUNCATED),
    (Fault.TRUNCATE, True, ErrorClass.TRUNCATED),
    (Fault.ERROR_EVENT, True, ErrorClass.HTTP_5XX),
    (Fault.MALFORMED, True, ErrorClass.PROTOCOL),
    (Fault.WRONG_CONTENT_TYPE, True, ErrorClass.PROTOCOL),
    (Fault.HTTP_500, True, ErrorClass.HTTP_5XX),
    (Fault.HTTP_400, False, ErrorClass.HTTP_4XX),
])
async def test_a_fault_is_classified(client: HttpClients, sim: BackgroundSimulator,
                                     via_httpx: bool, fault: Fault, stream: bool,
                                     expected: ErrorClass) -> None:
    m = await one(client, sim, via_httpx=via_httpx, fault=fault, stream=stream,
                  partial_images=1)
    assert m.error_class is expected, m.error_detail
    assert m.items is None
