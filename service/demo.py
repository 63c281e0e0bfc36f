"""The demo's objects: an endpoint on the built-in simulator and a constant-rate probe."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.load.profiles import ConstantProfile
from sustain.probes.workload.spec import Workload
from sustain.service.db import crud
from sustain.service.db.models import Endpoint, Probe

DEMO_ENDPOINT = "demo-simulator"
DEMO_PROBE = "demo-constant"


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
    return probe
