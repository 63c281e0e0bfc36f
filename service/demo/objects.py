"""The demo's objects, so its first screen shows what sustain is for: two endpoints on the
built-in simulator (8 generations at once each, with a declared deployment), a constant-rate
probe with an availability SLO on the one, and a small capacity probe that finds the knee of
the other. Each probe has its simulator to itself: the capacity probe saturates its own on
purpose, and the constant probe's figures stay the simulator's truth."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.load.profiles import CapacityProfile, ConstantProfile
from sustain.probes.measure.capacity_slo import CapacitySlo
from sustain.probes.measure.deployment import Deployment
from sustain.probes.workload.spec import Workload
from sustain.service.db import crud
from sustain.service.db import slos as slo_queries
from sustain.service.db.models import Endpoint, Probe, Slo
from sustain.service.schemas.slos import SloCreate
from sustain.simulator.config import SimulatorConfig

DEMO_ENDPOINT = "demo-simulator"
DEMO_CAPACITY_ENDPOINT = "demo-capacity-simulator"
DEMO_PROBE = "demo-constant"
DEMO_CAPACITY = "demo-capacity"
DEMO_SLO = "demo-availability"
DEMO_BATCH = 8
"""Generations the demo's simulator serves at once: the capacity probe's answer."""
DEMO_MODEL = "sim-model"
"""The model the demo's simulators serve and its endpoints name."""
DEMO_SIMULATOR = SimulatorConfig(model=DEMO_MODEL, max_batch=DEMO_BATCH, strict_model=True)
"""How each of the demo's simulators behaves: `sustain simulate`'s default latency (TTFT and
ITL, which the banner states so that a user can hold sustain's figures against them),
DEMO_BATCH generations at once, and strict about its model, as vLLM is: a request naming
another model gets vLLM's 404 (`The model `gpt-4o` does not exist.`), so the failure a wrong
--model meets can be seen against the demo."""
DEMO_DEPLOYMENT = Deployment(accelerator="simulated GPU", accelerators=1, price_per_hour=2.0,
                             power_kw=0.7)


DEMO_CONSTANT_RATE = 2.0
DEMO_CONSTANT_DURATION_S = 5.0
DEMO_TOKENS = 32


async def _endpoint(session: AsyncSession, name: str, base_url: str) -> Endpoint:
    """The named demo endpoint at base_url, created or moved there."""
    endpoint = await crud.get_by_name(session, Endpoint, name)
    if endpoint is None:
        return await crud.create(session, Endpoint, {
            "name": name, "base_url": base_url, "api_kind": "openai-chat",
            "model": DEMO_MODEL, "headers": {}, "auth_secret_ref": None,
            "timeout_connect_s": 5.0, "timeout_first_token_s": 30.0, "timeout_total_s": 60.0,
            "tls_verify": True, "labels": {"demo": "true"},
            "deployment": DEMO_DEPLOYMENT.model_dump(mode="json"),
        }, "endpoint")
    if endpoint.base_url != base_url:
        endpoint = await crud.update(session, endpoint, {"base_url": base_url}, "endpoint")
    return endpoint


def moved_url(base_url: str, moved: dict[str, str]) -> str | None:
    """base_url with its origin replaced when that origin moved (`http://127.0.0.1:1234` ->
    `http://127.0.0.1:5678`), else None."""
    for old, new in moved.items():
        if base_url == old or base_url.startswith(old + "/"):
            return new + base_url[len(old):]
    return None


async def follow_moved_simulators(session: AsyncSession, moved: dict[str, str]) -> list[str]:
    """Point the endpoints a user made against a demo simulator that had to move at its new
    address (the demo's own follow in ensure_demo_objects); the names of those moved."""
    names = []
    for old in moved:
        found = await session.scalars(select(Endpoint).where(
            Endpoint.base_url.startswith(old),
            Endpoint.name.not_in((DEMO_ENDPOINT, DEMO_CAPACITY_ENDPOINT))))
        for endpoint in found:
            new = moved_url(endpoint.base_url, moved)
            if new is not None and new != endpoint.base_url:
                await crud.update(session, endpoint, {"base_url": new}, "endpoint")
                names.append(endpoint.name)
    return names


async def ensure_demo_objects(session: AsyncSession, constant_url: str, capacity_url: str,
                              moved: dict[str, str] | None = None) -> list[str]:
    """Create the demo's endpoints, probes and SLO once, point the endpoints at this start's
    simulators, and move the user's endpoints that followed a simulator that moved (`moved`:
    old origin -> new origin); the names of the user's endpoints moved. Idempotent."""
    followed = await follow_moved_simulators(session, moved or {})
    endpoint = await _endpoint(session, DEMO_ENDPOINT, constant_url)
    capacity_endpoint = await _endpoint(session, DEMO_CAPACITY_ENDPOINT, capacity_url)
    if await crud.get_by_name(session, Probe, DEMO_PROBE) is None:
        await crud.create(session, Probe, {
            "name": DEMO_PROBE, "endpoint_id": endpoint.id,
            "workload": Workload(input_tokens=DEMO_TOKENS, max_tokens=DEMO_TOKENS
                                 ).model_dump(mode="json"),
            "profile": ConstantProfile(rate=DEMO_CONSTANT_RATE,
                                       duration_s=DEMO_CONSTANT_DURATION_S
                                       ).model_dump(mode="json"),
            "interval_seconds": 15, "jitter_seconds": 0.0, "enabled": True,
            "slo_ttft_ms": 200.0, "slo_tpot_ms": 50.0, "slo_e2e_ms": 2000.0,
            "labels": {"demo": "true"},
        }, "probe")
    capacity = await crud.get_by_name(session, Probe, DEMO_CAPACITY)
    if capacity is None:
        await crud.create(session, Probe, {
            "name": DEMO_CAPACITY, "endpoint_id": capacity_endpoint.id,
            "workload": Workload(input_tokens=DEMO_TOKENS, max_tokens=DEMO_TOKENS
                                 ).model_dump(mode="json"),
            "profile": CapacityProfile(slo=CapacitySlo(ttft_ms=200), minimum=1, maximum=16,
                                       duration_s=2.0).model_dump(mode="json"),
            "interval_seconds": 120, "jitter_seconds": 0.0, "enabled": True,
            "labels": {"demo": "true"},
        }, "probe")
    elif capacity.endpoint_id == endpoint.id:  # a data directory from before the split
        await crud.update(session, capacity, {"endpoint_id": capacity_endpoint.id}, "probe")
    if await crud.get_by_name(session, Slo, DEMO_SLO) is None:
        await crud.create(session, Slo, slo_queries.columns(SloCreate.model_validate({
            "name": DEMO_SLO, "probes": [DEMO_PROBE], "sli": {"kind": "availability"},
            "objective": 0.99, "window": "1d",
            "description": "The demo probe's requests succeed 99 % of the time."})), "slo")
    return followed


def probe_line(constant_url: str) -> str:
    """The `sustain probe` command the banner gives: the demo probe's own load against its
    simulator, to paste in another terminal."""
    return (f"sustain probe {constant_url} --model {DEMO_MODEL} --profile constant "
            f"--rate {DEMO_CONSTANT_RATE:g} --duration {DEMO_CONSTANT_DURATION_S:g} "
            f"--input-tokens {DEMO_TOKENS} --output-tokens {DEMO_TOKENS}")


def simulator_truth(config: SimulatorConfig) -> str:
    """The latency a simulator is set to, in the words of what sustain measures: `TTFT 50 ms,
    ITL 10 ms` (medians when jittered; TTFT plus its prefill cost per prompt token when it
    has one)."""
    ttft = f"TTFT {config.ttft_ms:g} ms"
    if config.prefill_ms_per_token:
        ttft += f" + {config.prefill_ms_per_token:g} ms per uncached prompt token"
    if config.ttft_sigma:
        ttft += " (median)"
    itl = f"ITL {config.itl_ms:g} ms" + (" (median)" if config.itl_sigma else "")
    return f"{ttft}, {itl}"


def demo_banner(base: str, constant_url: str, capacity_url: str, database_url: str | None,
                new_admin_key: str | None, followed: list[str], *,
                simulator: SimulatorConfig) -> str:
    """What `sustain demo` prints once it is up: where to look, what its simulators are set
    to (`simulator`, the config they were started with) beside a `sustain probe` line to
    paste, the database URL the other commands can use while the demo holds the data
    directory, and the admin key when it made one (plain text, printed literally)."""
    lines = [
        f"sustain demo: probe '{DEMO_PROBE}' ({DEMO_CONSTANT_RATE:g} req/s for "
        f"{DEMO_CONSTANT_DURATION_S:g} s, at once, then every 15 s, under the SLO "
        f"'{DEMO_SLO}') against the simulator at {constant_url}, and '{DEMO_CAPACITY}' (the "
        f"highest concurrency "
        f"with TTFT p99 <= 200 ms, every 2 min) against its own at {capacity_url} "
        f"({simulator.max_batch} generations at once each)",
        f"  status page  {base}/",
        f"  latest run   {base}/runs/latest",
        f"  API docs     {base}/docs",
        f"  metrics      {base}/metrics",
        f"The simulators serve model '{simulator.model}', set to {simulator_truth(simulator)}: "
        "compare what sustain measures with that. Measure one yourself (in another terminal"
        + ("; another --model gets the 404 vLLM answers):" if simulator.strict_model else
           "):"),
        f"  {probe_line(constant_url)}",
    ]
    if database_url is not None:
        lines += ["While the demo runs, `sustain compare`, `keys` and `export` (with the same "
                  "SUSTAIN_DATA_DIR) use its database; other PostgreSQL clients reach it at:",
                  f"  export SUSTAIN_DATABASE_URL='{database_url}'"]
    for name in followed:
        lines.append(f"Endpoint '{name}' pointed at a demo simulator that had to move; it "
                     "now points at the simulator's new port.")
    lines.append("Reads need no key here (loopback only); writes need the admin key"
                 + (" (SUSTAIN_ADMIN_KEY)." if new_admin_key is None else
                    f", new for this run:\n  {new_admin_key}\n"
                    f"  e.g. curl -H 'Authorization: Bearer {new_admin_key}' "
                    f"{base}/api/v1/keys"))
    lines.append("Press Ctrl-C to stop.")
    return "\n".join(lines)
