"""`sustain probe`'s flags (ProbeFlags) as a one-shot run (OneShot, in
sustain.service.scheduling.one_shot, which measures it), and the run stored if asked. Its
tables are in `sustain.probes.report_tables`.

Flags become the same validated objects the REST API uses (EndpointCreate, LoadProfile,
Workload), so a probe tried from the shell can be saved, and later scheduled, unchanged.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError
from rich.live import Live
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.load.live import LiveStats
from sustain.probes.load.plan import sessions_problem
from sustain.probes.load.profiles import ConstantProfile, LoadProfile, parse_profile
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.protocols.registry import is_check
from sustain.probes.report_tables import progress_table
from sustain.probes.run_result import RunResult
from sustain.probes.runner import RunBudget
from sustain.probes.workload.corpus import RagSpec
from sustain.probes.workload.images import ImageSpec
from sustain.probes.workload.spec import Workload
from sustain.service.cli.probe_flags import (
    FLAG_OF,
    FlagError,
    ProbeFlags,
    flag_error,
    kind_workload,
)
from sustain.service.db import crud
from sustain.service.db import runs as run_queries
from sustain.service.db.models import Endpoint, Probe
from sustain.service.evaluation.thresholds import threshold_problems
from sustain.service.ingest.store import store_run
from sustain.service.policy.limits import LoadLimits, Path, limit_violations
from sustain.service.runs.finals import RunFinal, completed
from sustain.service.runs.rows import sample_tuple
from sustain.service.scheduling.one_shot import EGRESS, OneShot, endpoint_name, run_one_shot
from sustain.service.schemas.endpoints import EndpointCreate
from sustain.service.ticks.locations import DEFAULT_LOCATION

DEFAULT_DURATION_S = 10.0
DEFAULT_IN_FLIGHT = int(ConstantProfile.model_fields["max_in_flight"].default)


def image_spec(flags: ProbeFlags) -> ImageSpec | None:
    """`--images N --image-size WxH` as the workload's `images`; FlagError for a bad size."""
    if flags.images is None:
        return None
    width, sep, height = flags.image_size.lower().partition("x")
    if not (sep and width.isdigit() and height.isdigit()):
        raise FlagError(f"--image-size: expected WIDTHxHEIGHT, got {flags.image_size!r}")
    return ImageSpec(count=flags.images, width=int(width), height=int(height))


def build(flags: ProbeFlags, limits: LoadLimits | None = None) -> OneShot:
    """The run the flags describe, validated as the REST API validates it (within `limits`,
    when given); every problem is a FlagError naming its flag."""
    try:
        endpoint = EndpointCreate.model_validate(endpoint_fields(flags))
        workload = Workload(input_tokens=flags.input_tokens, max_tokens=flags.output_tokens,
                            stream=flags.stream, cache="allow" if flags.allow_cache else "defeat",
                            shared_prefix_tokens=flags.shared_prefix_tokens,
                            dataset=flags.dataset, sessions=flags.sessions, turns=flags.turns,
                            turn_delay_s=flags.turn_delay,
                            session_header=flags.session_header, batch_size=flags.batch_size,
                            dimensions=flags.dimensions, documents=flags.documents,
                            query_tokens=flags.query_tokens,
                            audio_s=flags.audio_seconds, images=image_spec(flags),
                            reasoning_effort=flags.reasoning_effort,
                            thinking_budget_tokens=flags.thinking_budget_tokens,
                            rag=rag_spec(flags), connection=flags.connection,
                            **kind_workload(flags))
        rag = rag_endpoints(flags, endpoint)
        slo = SloThresholds(ttft_ms=flags.slo_ttft_ms, tpot_ms=flags.slo_tpot_ms,
                            ttfo_ms=flags.slo_ttfo_ms, e2e_ms=flags.slo_e2e_ms)
    except ValidationError as exc:
        raise flag_error(exc) from None
    for name, message in threshold_problems(endpoint.api_kind, slo):
        raise FlagError(f"--slo-{name.replace('_', '-')}: {message}")
    denied = EGRESS.check_url(str(endpoint.base_url))
    if denied is not None:
        raise FlagError(f"BASE_URL: egress denied: {denied}")
    denied = None if endpoint.metrics_url is None else EGRESS.check_url(str(endpoint.metrics_url))
    if denied is not None:
        raise FlagError(f"--metrics-url: egress denied: {denied}")
    for flag, other in zip(("--rag-embed-url", "--rag-rerank-url"), rag or (), strict=False):
        if other is not None and (denied := EGRESS.check_url(str(other.base_url))):
            raise FlagError(f"{flag}: egress denied: {denied}")
    profile = load_profile(flags, limits)
    if workload.in_sessions and (problem := sessions_problem(profile)) is not None:
        raise FlagError(f"{'--sessions' if flags.sessions else '--turns'}: {problem}")
    if limits is not None and (found := limit_violations(profile.planned_load(), limits)):
        raise FlagError("; ".join(f"{flag_of_path(path)}: {message}"
                                  for path, message in found))
    return OneShot(endpoint, profile, workload, slo, rag)


def rag_spec(flags: ProbeFlags) -> RagSpec | None:
    """--rag-corpus and its counts as the workload's `rag`."""
    if flags.rag_corpus is None:
        return None
    if flags.rag_embed_url is None:
        raise FlagError("--rag-embed-url is required with --rag-corpus")
    return RagSpec(corpus=flags.rag_corpus, top_k=flags.rag_top_k,
                   rerank_top_n=flags.rag_top_n,
                   pgvector_dsn_ref=None if flags.rag_pgvector_env is None
                   else f"env:{flags.rag_pgvector_env}")


def rag_endpoints(flags: ProbeFlags, generate: EndpointCreate
                  ) -> tuple[EndpointCreate, EndpointCreate | None] | None:
    """A RAG probe's embeddings and rerank endpoints, with the generating endpoint's key
    and headers (one --api-key-env for the whole pipeline)."""
    if flags.rag_corpus is None or flags.rag_embed_url is None:
        return None

    def endpoint(url: str, kind: str, model: str | None, flag: str) -> EndpointCreate:
        fields = {**generate.model_dump(), "name": endpoint_name(url), "base_url": url,
                  "api_kind": kind, "model": model or generate.model, "http_check": None,
                  "metrics_url": None, "deployment": None}
        try:
            return EndpointCreate.model_validate(fields)
        except ValidationError as exc:
            raise FlagError(f"{flag}: {exc.errors()[0]['msg']}") from None

    embed = endpoint(flags.rag_embed_url, "openai-embeddings", flags.rag_embed_model,
                     "--rag-embed-url")
    rerank = None if flags.rag_rerank_url is None else endpoint(
        flags.rag_rerank_url, "rerank", flags.rag_rerank_model, "--rag-rerank-url")
    return embed, rerank


def flag_of_path(path: Path) -> str:
    """The flag behind a profile field (`("stages", 2, "rate")` -> `--levels`)."""
    return next((FLAG_OF[p] for p in path if isinstance(p, str) and p in FLAG_OF),
                ".".join(str(p) for p in path))


def endpoint_fields(flags: ProbeFlags) -> dict[str, Any]:
    """The fields of the EndpointCreate. With --api http, BASE_URL is the URL to check: its
    scheme and host make the endpoint, its path and query the request."""
    base_url, check = flags.base_url, None
    if is_check(flags.api):
        parts = urlsplit(flags.base_url)
        base_url = f"{parts.scheme}://{parts.netloc}"
        check = {"method": flags.method,
                 "path": (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                 "expected_status": flags.expect_status, "body_contains": flags.expect_body}
    return {
        "name": endpoint_name(base_url), "base_url": base_url, "api_kind": flags.api,
        "model": flags.model or "n/a", "headers": flags.header, "http2": flags.http2,
        "http_check": check,
        "auth_secret_ref": None if flags.api_key_env is None else f"env:{flags.api_key_env}",
        "metrics_url": flags.metrics_url, "metrics_interval_s": flags.metrics_interval,
        "deployment": None if flags.accelerators is None and flags.price_per_hour is None
        and flags.power_kw is None and flags.accelerator is None
        and flags.watts_per_accelerator is None and not flags.gpus else {
            "accelerator": flags.accelerator, "accelerators": flags.accelerators,
            "price_per_hour": flags.price_per_hour, "currency": flags.currency,
            "power_kw": flags.power_kw, "watts_per_accelerator": flags.watts_per_accelerator,
            "gpus": flags.gpus or []},
    }


def load_profile(flags: ProbeFlags, limits: LoadLimits | None = None) -> LoadProfile:
    """The profile named by --profile, from the flags it uses. `steps` takes --levels as rates
    (one open-loop stage each), `sweep` as numbers of users. Each stage or level lasts
    --duration seconds: default 10, none for a concurrency run capped by --max-requests.
    Open loops keep at most SUSTAIN_MAX_CONCURRENCY requests in flight when that is below
    the profiles' default (no flag sets it)."""
    kind = flags.profile
    length = flags.duration if flags.duration is not None else (
        None if flags.max_requests is not None and kind == "concurrency" else DEFAULT_DURATION_S)
    levels = flags.levels or []
    raw: dict[str, Any] = {"kind": kind, "warmup_s": flags.warmup, "workers": flags.workers}
    if limits is not None and kind in ("constant", "poisson", "steps"):
        raw["max_in_flight"] = min(DEFAULT_IN_FLIGHT, limits.max_concurrency)
    if kind in ("constant", "poisson"):
        raw.update(rate=flags.rate, duration_s=length, max_requests=flags.max_requests)
        if kind == "poisson":
            raw["burstiness"] = flags.burstiness
    elif kind == "concurrency":
        raw.update(users=flags.concurrency, duration_s=length, max_requests=flags.max_requests)
    elif kind == "steps":
        raw["stages"] = [{"rate": level, "duration_s": length} for level in levels]
    elif kind == "trace":
        raw.update(path=flags.trace, format=flags.trace_format, speedup=flags.speedup,
                   max_requests=flags.max_requests)
    elif kind == "sweep":
        raw.update(levels=[int(level) for level in levels], duration_s=length,
                   max_requests=flags.max_requests)
    elif kind == "pareto":
        raw.update(max_concurrency=flags.max_concurrency, points=flags.points,
                   duration_s=length, max_requests=flags.max_requests)
    elif kind == "capacity":
        raw.update(minimum=flags.min_concurrency, maximum=flags.max_concurrency,
                   duration_s=length, min_samples=flags.min_samples, slo={
                       "ttft_ms": flags.slo_ttft_ms, "tpot_ms": flags.slo_tpot_ms,
                       "ttfo_ms": flags.slo_ttfo_ms,
                       "e2e_ms": flags.slo_e2e_ms, "percentile": flags.slo_percentile,
                       "min_success": flags.min_success})
    try:
        return parse_profile(raw)
    except ValidationError as exc:
        raise flag_error(exc) from None


async def run_with_display(shot: OneShot, show: Live | None, max_connections: int = 1000,
                           budget: RunBudget | None = None) -> RunResult:
    """Run the one-shot (held to `budget`), with its progress table in `show` four times a
    second while it goes."""
    def shown(live: LiveStats, elapsed: float) -> None:
        if show is not None:
            show.update(progress_table(live, elapsed))
    return await run_one_shot(shot, shown, max_connections, budget)


async def save(session: AsyncSession, shot: OneShot, result: RunResult,
               location: str = DEFAULT_LOCATION) -> int:
    """Store the one-shot as a manual run of a disabled probe (created on first use), measured
    from `location` (SUSTAIN_LOCATION where the command ran)."""
    values = shot.endpoint.model_dump(mode="json")
    endpoint = await crud.get_by_name(session, Endpoint, shot.endpoint.name)
    if endpoint is None:
        endpoint = await crud.create(session, Endpoint, values, "endpoint")
    else:
        endpoint = await crud.update(session, endpoint, values, "endpoint")
    probe_name = f"{shot.endpoint.name}-{shot.profile.kind}"[:100]
    columns = {"endpoint_id": endpoint.id, "workload": shot.workload.model_dump(mode="json"),
               "profile": shot.profile.model_dump(mode="json"),
               "slo_ttft_ms": shot.slo.ttft_ms, "slo_tpot_ms": shot.slo.tpot_ms,
               "slo_ttfo_ms": shot.slo.ttfo_ms, "slo_e2e_ms": shot.slo.e2e_ms}
    probe = await crud.get_by_name(session, Probe, probe_name)
    if probe is None:
        probe = await crud.create(session, Probe, {
            "name": probe_name, "interval_seconds": 3600, "jitter_seconds": 0.0,
            "enabled": False, "labels": {"source": "cli"}, **columns}, "probe")
    else:
        probe = await crud.update(session, probe, columns, "probe")
    run = await run_queries.create_manual(session, probe.id, location)
    run.started_at = min((s.sent_at for s in result.samples), default=None)
    await session.flush()
    rows = [sample_tuple(run.id, pos, probe.id, sample)
            for pos, sample in enumerate(result.samples)]
    final = completed(RunFinal(run_id=run.id, probe_id=probe.id,
                               scheduled_for=run.scheduled_for, status="failed"), result)
    # as every finished run is: a refused record fails the run, with why
    await store_run(await session.connection(), run.id, rows, final)
    return run.id
