"""The item kinds against the simulator over real loopback HTTP, through both client paths:
an embeddings request carries `batch_size` inputs and a rerank request `documents` documents,
each answered whole; the run reports items per second and the server's input tokens, and a
wrong answer (a short vector, a document index past those sent) is a protocol failure."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import ConcurrencyProfile, SingleProfile
from sustain.probes.measure.sample import ErrorClass, Sample
from sustain.probes.run_result import RunResult
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import FAULT_HEADER, Fault, SimulatorConfig
from sustain.simulator.server import BackgroundSimulator

BASE_MS = 20.0
ITEM_MS = 2.0
DIMENSIONS = 48
INPUT_TOKENS = 10
BATCH = {ApiKind.OPENAI_EMBEDDINGS: 6, ApiKind.RERANK: 5}
"""Items per request: embeddings inputs (batch_size), rerank documents."""
QUERY_TOKENS = 4
KINDS = [ApiKind.OPENAI_EMBEDDINGS, ApiKind.RERANK]


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundSimulator]:
    config = SimulatorConfig(ttft_ms=BASE_MS, item_ms=ITEM_MS, embedding_dimensions=DIMENSIONS)
    with BackgroundSimulator(config) as server:
        yield server


@pytest.fixture(params=KINDS, ids=[kind.value for kind in KINDS])
def kind(request: pytest.FixtureRequest) -> ApiKind:
    return ApiKind(request.param)


def workload(**fields: object) -> Workload:
    return Workload.model_validate({
        "input_tokens": INPUT_TOKENS, "batch_size": BATCH[ApiKind.OPENAI_EMBEDDINGS],
        "documents": BATCH[ApiKind.RERANK], "query_tokens": QUERY_TOKENS, **fields})


async def run(client: HttpClients, sim: BackgroundSimulator, kind: ApiKind,
              via_httpx: bool = False, fault: Fault | None = None, profile: object = None,
              **fields: object) -> RunResult:
    target = Target(base_url=sim.base_url, api_kind=kind, model="m", http2=via_httpx,
                    headers={FAULT_HEADER: fault.value} if fault else {})
    return await execute(client, target, workload(**fields),
                         SingleProfile() if profile is None else profile)  # type: ignore[arg-type]


async def one(client: HttpClients, sim: BackgroundSimulator, kind: ApiKind,
              via_httpx: bool = False, fault: Fault | None = None, **fields: object
              ) -> Sample:
    (sample,) = (await run(client, sim, kind, via_httpx, fault, **fields)).samples
    return sample


def words(kind: ApiKind) -> int:
    """Input tokens the simulator counts: one per word, the salt included."""
    per_text = INPUT_TOKENS
    return BATCH[kind] * per_text + (QUERY_TOKENS + 1 if kind is ApiKind.RERANK else 0)


async def test_a_batch_is_answered_whole_with_its_items_and_input_tokens(
        client: HttpClients, sim: BackgroundSimulator, kind: ApiKind, via_httpx: bool) -> None:
    m = (await one(client, sim, kind, via_httpx)).measurement
    assert m.error_class is None, m.error_detail
    assert m.items == BATCH[kind]
    assert m.input_tokens == words(kind)
    assert (m.ttft_ms, m.itl_ms, m.output_tokens) == (None, (), 0)
    assert m.e2e_ms >= BASE_MS + ITEM_MS * BATCH[kind]


async def test_a_run_reports_items_per_second(
        client: HttpClients, sim: BackgroundSimulator, kind: ApiKind) -> None:
    result = await run(client, sim, kind, profile=ConcurrencyProfile(
        users=2, duration_s=None, max_requests=8))
    summary = result.summary
    assert summary.successes == 8
    assert summary.items == 8 * BATCH[kind]
    assert summary.items_per_second is not None
    assert summary.requests_per_second is not None
    assert summary.items_per_second == pytest.approx(
        BATCH[kind] * summary.requests_per_second)
    assert summary.input_tokens == 8 * words(kind)
    assert summary.output_tokens_per_second == 0.0


@pytest.mark.parametrize(("fault", "expected"), [
    (Fault.BAD_ITEMS, ErrorClass.PROTOCOL),
    (Fault.MALFORMED, ErrorClass.PROTOCOL),
    (Fault.EMPTY, ErrorClass.EMPTY),
    (Fault.HTTP_500, ErrorClass.HTTP_5XX),
    (Fault.HTTP_429, ErrorClass.HTTP_429),
])
async def test_a_fault_is_classified(client: HttpClients, sim: BackgroundSimulator,
                                     kind: ApiKind, via_httpx: bool, fault: Fault,
                                     expected: ErrorClass) -> None:
    m = (await one(client, sim, kind, via_httpx, fault)).measurement
    assert m.error_class is expected, m.error_detail
    assert m.items is None


async def test_vectors_of_another_length_than_the_workload_names_fail(
        client: HttpClients, sim: BackgroundSimulator) -> None:
    good = (await one(client, sim, ApiKind.OPENAI_EMBEDDINGS, dimensions=DIMENSIONS))
    assert good.measurement.error_class is None
    bad = (await one(client, sim, ApiKind.OPENAI_EMBEDDINGS, dimensions=DIMENSIONS + 1))
    assert bad.measurement.error_class is ErrorClass.PROTOCOL
    assert bad.measurement.error_detail == \
        f"embeddings of {DIMENSIONS} dimensions, not {DIMENSIONS + 1}"
