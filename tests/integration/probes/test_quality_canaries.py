"""Quality canaries against the simulator: dataset lines with an `expect` are
scored on the reply the endpoint really gave, the others are not, and the run counts them.
The simulator answers `tok0 tok1 ...`: of the example's five canaries, two pass (`contains`
tok0, a `regex`) and three fail (Paris, at most two tokens, a JSON object)."""

from __future__ import annotations

from pathlib import Path

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import ConcurrencyProfile
from sustain.probes.runner import execute
from sustain.probes.workers.pool import WorkerPool
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload
from tests.conftest import SimulatorHandle

CANARIES = str(Path(__file__).parents[3] / "examples" / "datasets" / "canaries.jsonl")
ANYWHERE = DatasetPolicy.unrestricted()
PROFILE = ConcurrencyProfile(users=2, max_requests=12)  # the six lines, twice


def target(server: SimulatorHandle) -> Target:
    return Target(base_url=server.base_url, api_kind=ApiKind.OPENAI_CHAT, model="m")


async def test_canaries_are_scored_on_the_real_reply(simulator: SimulatorHandle) -> None:
    async with HttpClients() as clients:
        result = await execute(clients, target(simulator), Workload(dataset=CANARIES),
                               PROFILE, datasets=ANYWHERE)
    assert result.summary.successes == 12
    quality = result.summary.quality
    assert quality is not None
    assert (quality.checked, quality.passed) == (10, 4)
    assert sum(1 for s in result.samples if s.quality is None) == 2  # the plain prompt
    assert all(s.measurement.reply is None for s in result.samples)  # verdicts, not text


async def test_workers_score_canaries_and_send_back_only_the_verdict(
        simulator: SimulatorHandle) -> None:
    async with WorkerPool(2) as pool:
        result = await pool.measure(target(simulator), Workload(dataset=CANARIES),
                                    ConcurrencyProfile(users=2, max_requests=12, workers=2),
                                    datasets=ANYWHERE)
    quality = result.summary.quality
    assert quality is not None
    assert (quality.checked, quality.passed) == (10, 4)
