"""The demo's objects, so its first screen shows what sustain is for: an endpoint on the
built-in simulator (8 generations at once) with a declared deployment, a constant-rate probe
with an availability SLO, and a small capacity probe that finds the simulator's knee."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.load.profiles import CapacityProfile, ConstantProfile
from sustain.probes.measure.capacity_slo import CapacitySlo
from sustain.probes.measure.deployment import Deployment
from sustain.probes.workload.spec import Workload
from sustain.service.db import crud
from sustain.service.db import slos as slo_queries
from sustain.service.db.models import Endpoint, Probe, Slo
from sustain.service.schemas.slos import SloCreate

DEMO_ENDPOINT = "demo-simulator"
DEMO_PROBE = "demo-constant"
DEMO_CAPACITY = "demo-capacity"
DEMO_SLO = "demo-availability"
DEMO_BATCH = 8
"""Generations the demo's simulator serves at once: the capacity probe's answer."""
DEMO_DEPLOYMENT = Deployment(accelerator="simulated GPU", accelerators=1, price_per_hour=2.0,
                             power_kw=0.7)


async def ensure_demo_objects(session: AsyncSession, simulator_base_url: str) -> Probe:
    """Create or refresh the demo endpoint and probe (idempotent: the simulator's port changes
    from one start to the next, so the endpoint URL is updated)."""
    endpoint = await crud.get_by_name(session, Endpoint, DEMO_ENDPOINT)
    if endpoint is None:
        endpoint = await crud.create(session, Endpoint, {
            "name": DEMO_ENDPOINT, "base_url": simulator_base_url, "api_kind": "openai-chat",
            "model": "sim-model", "headers": {}, "auth_secret_ref": None,
            "timeout_connect_s": 5.0, "timeout_first_token_s": 30.0, "timeout_total_s": 60.0,
            "tls_verify": True, "labels": {"demo": "true"},
            "deployment": DEMO_DEPLOYMENT.model_dump(mode="json"),
        }, "endpoint")
    elif endpoint.base_url != simulator_base_url:
        endpoint = await crud.update(session, endpoint, {"base_url": simulator_base_url},
                                     "endpoint")
    probe = await crud.get_by_name(session, Probe, DEMO_PROBE)
    if probe is None:
        probe = await crud.create(session, Probe, {
            "name": DEMO_PROBE, "endpoint_id": endpoint.id,
            "workload": Workload(input_tokens=32, max_tokens=32).model_dump(mode="json"),
            "profile": ConstantProfile(rate=2.0, duration_s=5.0).model_dump(mode="json"),
            "interval_seconds": 15, "jitter_seconds": 0.0, "enabled": True,
            "slo_ttft_ms": 200.0, "slo_tpot_ms": 50.0, "slo_e2e_ms": 2000.0,
            "labels": {"demo": "true"},
        }, "probe")
    if await crud.get_by_name(session, Probe, DEMO_CAPACITY) is None:
        await crud.create(session, Probe, {
            "name": DEMO_CAPACITY, "endpoint_id": endpoint.id,
            "workload": Workload(input_tokens=32, max_tokens=32).model_dump(mode="json"),
            "profile": CapacityProfile(slo=CapacitySlo(ttft_ms=200), minimum=1, maximum=16,
                                       duration_s=2.0).model_dump(mode="json"),
            "interval_seconds": 120, "jitter_seconds": 0.0, "enabled": True,
            "labels": {"demo": "true"},
        }, "probe")
    if await crud.get_by_name(session, Slo, DEMO_SLO) is None:
        await crud.create(session, Slo, slo_queries.columns(SloCreate.model_validate({
            "name": DEMO_SLO, "probes": [DEMO_PROBE], "sli": {"kind": "availability"},
            "objective": 0.99, "window": "1d",
            "description": "The demo probe's requests succeed 99 % of the time."})), "slo")
    return probe
