"""A `quality` SLI: a probe's canaries count as its SLI events, passed over
checked, in the SLO's status, its burn rates and /metrics."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SimulatorHandle
from tests.integration.service.helpers import create_endpoint, create_probe, samples_of
from tests.integration.service.test_reach import app_with, run_now

EXAMPLE = Path(__file__).parents[3] / "examples" / "datasets" / "canaries.jsonl"


async def test_the_quality_sli_counts_passed_over_checked_canaries(
        database_url: str, simulator: SimulatorHandle, tmp_path: Path) -> None:
    (tmp_path / "canaries.jsonl").write_text(EXAMPLE.read_text())
    async with app_with(database_url, dataset_dir=tmp_path) as api:
        endpoint = await create_endpoint(api, simulator.base_url)
        probe = await create_probe(api, endpoint["id"], enabled=False, profile={
            "kind": "concurrency", "users": 1, "max_requests": 6},
            workload={"dataset": str(tmp_path / "canaries.jsonl")})
        r = await api.post("/api/v1/slos", json={
            "name": "answers", "probes": [probe["name"]], "sli": {"kind": "quality"},
            "objective": 0.9, "window": "1d"})
        assert r.status_code == 201, r.text
        slo = r.json()
        r = await api.post("/api/v1/slos", json={
            "name": "bad", "probes": [probe["name"]],
            "sli": {"kind": "quality", "metric": "ttft"}, "objective": 0.9})
        assert r.status_code == 422
        run = await run_now(api, probe["id"])
        assert run["summary"]["quality"] == {"checked": 5, "passed": 2}
        status = (await api.get(f"/api/v1/slos/{slo['id']}/status")).json()
        assert (status["good"], status["total"]) == (2, 5)
        assert status["compliance"] == 0.4
        metrics = samples_of((await api.get("/metrics")).text)
        checks = {labels["result"]: value
                  for labels, value in metrics["sustain_quality_checks_total"]}
        assert checks == {"passed": 2.0, "failed": 3.0}
