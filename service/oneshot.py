"""`sustain probe`: a one-shot run against a URL, from command-line flags to a report.

Flags become the same validated objects the REST API uses (EndpointCreate, LoadProfile,
Workload), so a probe tried from the shell can be saved, and later scheduled, unchanged.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError
from rich.console import Group
from rich.live import Live
from rich.table import Table
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import Target
from sustain.probes.load.live import LiveStats
from sustain.probes.load.profiles import LoadProfile, parse_profile
from sustain.probes.measure.percentiles import Distribution
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.measure.summary import RunSummary
from sustain.probes.runner import RunResult, execute
from sustain.probes.workload.spec import Workload
from sustain.service.api.schemas.endpoints import EndpointCreate
from sustain.service.db import crud, partitions
from sustain.service.db import runs as run_queries
from sustain.service.db.models import Endpoint, Probe
from sustain.service.domain.targets import target_of
from sustain.service.ingest.finals import RunFinal, completed
from sustain.service.ingest.rows import sample_tuple, sent_at
from sustain.service.ingest.writer import store

UNREACHABLE = frozenset({ErrorClass.CONNECT, ErrorClass.DNS, ErrorClass.TLS,
                         ErrorClass.TIMEOUT_CONNECT})
FLAG_OF = {
    "rate": "--rate", "burstiness": "--burstiness", "users": "--concurrency",
    "levels": "--levels", "stages": "--levels", "duration_s": "--duration",
    "max_requests": "--max-requests", "warmup_s": "--warmup", "input_tokens": "--input-tokens",
    "max_tokens": "--output-tokens", "base_url": "BASE_URL", "model": "--model",
    "api_kind": "--api", "headers": "--header", "auth_secret_ref": "--api-key-env",
    "kind": "--profile", "ttft_ms": "--slo-ttft-ms", "tpot_ms": "--slo-tpot-ms",
    "e2e_ms": "--slo-e2e-ms", "method": "--method", "expected_status": "--expect-status",
    "body_contains": "--expect-body", "path": "BASE_URL",
}
DEFAULT_DURATION_S = 10.0


class FlagError(ValueError):
    """A flag value that cannot be used, with a message naming the flag."""


def flag_errors(exc: ValidationError) -> FlagError:
    messages = []
    for error in exc.errors():
        names = [str(p) for p in error["loc"] if isinstance(p, str)]
        ctx_field = (error.get("ctx") or {}).get("field")
        if ctx_field:
            names.append(str(ctx_field))
        flag = next((FLAG_OF[n] for n in reversed(names) if n in FLAG_OF), ".".join(names))
        messages.append(f"{flag}: {error['msg']}")
    return FlagError("; ".join(messages))


def parse_headers(pairs: list[str]) -> dict[str, str]:
    headers = {}
    for pair in pairs:
        name, sep, value = pair.partition(":")
        if not sep or not name.strip():
            raise FlagError(f"--header: expected NAME:VALUE, got {pair.split(':')[0]!r}...")
        headers[name.strip()] = value.strip()
    return headers


def parse_levels(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise FlagError(f"--levels: expected numbers separated by commas, got {text!r}") from None


def endpoint_name(base_url: str) -> str:
    """A stable name for an ad-hoc endpoint, from its host and port."""
    parts = urlsplit(base_url)
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{parts.hostname or 'endpoint'}-{parts.port or ''}")
    return ("cli-" + host.strip("-"))[:100]


@dataclass(frozen=True, slots=True)
class OneShot:
    """A validated one-shot run."""

    endpoint: EndpointCreate
    profile: LoadProfile
    workload: Workload
    slo: SloThresholds

    @property
    def target(self) -> Target:
        return target_of(self.endpoint)


def build(*, base_url: str, model: str | None, api: str, profile: str, rate: float | None,
          burstiness: float, concurrency: int | None, levels: str | None,
          duration: float | None, max_requests: int | None, warmup: float,
          input_tokens: int, output_tokens: int, stream: bool, headers: list[str],
          api_key_env: str | None, slo: dict[str, float | None], http2: bool = False,
          http_method: str = "GET", expect_status: int = 200,
          expect_body: str | None = None) -> OneShot:
    """Flags to validated objects; every problem is a FlagError naming its flag."""
    if model is None and api != "http":
        raise FlagError(f"--model is required with --api {api}")
    check = None
    if api == "http":
        parts = urlsplit(base_url)
        check = {"method": http_method, "path": (parts.path or "/") + (
            f"?{parts.query}" if parts.query else ""), "expected_status": expect_status,
            "body_contains": expect_body}
        base_url = f"{parts.scheme}://{parts.netloc}"
    try:
        endpoint = EndpointCreate.model_validate({
            "name": endpoint_name(base_url), "base_url": base_url, "api_kind": api,
            "model": model or "n/a", "headers": parse_headers(headers), "http2": http2,
            "http_check": check,
            "auth_secret_ref": None if api_key_env is None else f"env:{api_key_env}",
        })
        workload = Workload(input_tokens=input_tokens, max_tokens=output_tokens, stream=stream)
        thresholds = SloThresholds.model_validate(slo)
    except ValidationError as exc:
        raise flag_errors(exc) from None
    return OneShot(endpoint, profile_from_flags(
        kind=profile, rate=rate, burstiness=burstiness, concurrency=concurrency,
        levels=parse_levels(levels), duration=duration, max_requests=max_requests,
        warmup=warmup), workload, thresholds)


def profile_from_flags(*, kind: str, rate: float | None, burstiness: float,
                       concurrency: int | None, levels: list[float] | None,
                       duration: float | None, max_requests: int | None,
                       warmup: float) -> LoadProfile:
    """`steps` takes --levels as rates (one open-loop stage each); `sweep` takes them as
    concurrency levels. Each stage or level lasts --duration seconds (default 10)."""
    length = duration if duration is not None else (
        None if max_requests is not None and kind == "concurrency" else DEFAULT_DURATION_S)
    required = {"constant": ("--rate", rate), "poisson": ("--rate", rate),
                "concurrency": ("--concurrency", concurrency), "steps": ("--levels", levels),
                "sweep": ("--levels", levels)}
    if kind in required and required[kind][1] is None:
        raise FlagError(f"{required[kind][0]} is required with --profile {kind}")
    raw: dict[str, Any] = {"kind": kind, "warmup_s": warmup}
    if kind in ("constant", "poisson"):
        raw.update(rate=rate, duration_s=length, max_requests=max_requests)
        if kind == "poisson":
            raw["burstiness"] = burstiness
    elif kind == "concurrency":
        raw.update(users=concurrency, duration_s=length, max_requests=max_requests)
    elif kind == "steps":
        raw["stages"] = [{"rate": level, "duration_s": length} for level in levels or []]
    elif kind == "sweep":
        ints = [int(level) for level in levels or []]
        if levels is not None and ints != levels:
            raise FlagError("--levels: sweep levels are whole numbers of users")
        raw.update(levels=ints, duration_s=length, max_requests=max_requests)
    elif kind != "single":
        raise FlagError(f"--profile: unknown profile {kind!r}")
    try:
        return parse_profile(raw)
    except ValidationError as exc:
        raise flag_errors(exc) from None


def unreachable(result: RunResult) -> bool:
    """Every request failed before reaching the endpoint."""
    return bool(result.samples) and all(
        s.measurement.error_class in UNREACHABLE for s in result.samples)


async def run_with_display(shot: OneShot, show: Live | None, max_connections: int = 1000
                           ) -> RunResult:
    """Run the one-shot; refresh `show` four times a second while it goes."""
    live = LiveStats()
    started = time.monotonic()
    async with HttpClients(max_connections) as clients:
        run = asyncio.create_task(execute(clients, shot.target, shot.workload, shot.profile,
                                          shot.slo, live=live))
        while not run.done():
            if show is not None:
                show.update(progress_table(live, time.monotonic() - started))
            await asyncio.wait({run}, timeout=0.25)
        return run.result()


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def progress_table(live: LiveStats, elapsed_s: float) -> Table:
    table = Table(title="sustain probe", show_header=True, expand=False)
    for column in ("elapsed", "stage", "sent", "in flight", "errors", "TTFT p50 ms",
                   "TTFT p99 ms"):
        table.add_column(column, justify="right")
    table.add_row(f"{elapsed_s:.1f}s", live.stage, str(live.sent), str(live.in_flight),
                  str(live.errors), _ms(live.ttft_percentile(0.5)),
                  _ms(live.ttft_percentile(0.99)))
    return table


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def latency_table(summary: RunSummary) -> Table:
    table = Table(title="latency (ms)")
    for column in ("metric", "count", "p50", "p90", "p95", "p99", "p99.9", "max", "mean"):
        table.add_column(column, justify="right" if column != "metric" else "left")
    rows: list[tuple[str, Distribution]] = [
        ("TTFT", summary.ttft_ms), ("ITL", summary.itl_ms), ("TPOT", summary.tpot_ms),
        ("E2E", summary.e2e_ms), ("E2E corrected", summary.corrected_e2e_ms),
        ("lag", summary.lag_ms)]
    for name, dist in rows:
        if dist.count == 0:
            continue
        cells = [_ms(getattr(dist, key)) + ("*" if key in dist.low_count else "")
                 for key in ("p50", "p90", "p95", "p99", "p999")]
        table.add_row(name, str(dist.count), *cells, _ms(dist.max), _ms(dist.mean))
    table.caption = "* too few samples for a 99 % confidence bound on this percentile"
    return table


def results(result: RunResult) -> Group:
    s = result.summary
    head = Table(title="results", show_header=False)
    head.add_column("what")
    head.add_column("value", justify="right")
    availability = "-" if s.availability is None else f"{s.availability:.2%}"
    head.add_row("requests", f"{s.attempts} ({s.successes} ok)")
    head.add_row("availability", availability)
    head.add_row("errors", ", ".join(f"{k} {v}" for k, v in s.errors.items()) or "none")
    head.add_row("requests/s", _rate(s.request_throughput))
    head.add_row("output tokens/s" + (" (estimated)" if s.output_tokens_estimated else ""),
                 _rate(s.output_token_throughput))
    head.add_row("goodput (req/s)", _rate(s.goodput))
    head.add_row("generator", "SATURATED: latency figures not trustworthy"
                 if s.generator.saturated else "kept schedule")
    parts: list[Table] = [head, latency_table(s)]
    if len(result.stages) > 1:
        stages = Table(title="stages")
        for column in ("stage", "requests", "availability", "req/s", "tok/s", "TTFT p50",
                       "TTFT p99", "E2E p50", "E2E p99"):
            stages.add_column(column, justify="right")
        for stage in result.stages:
            t = stage.summary
            stages.add_row(stage.label, str(t.attempts),
                           "-" if t.availability is None else f"{t.availability:.2%}",
                           _rate(t.request_throughput), _rate(t.output_token_throughput),
                           _ms(t.ttft_ms.p50), _ms(t.ttft_ms.p99), _ms(t.e2e_ms.p50),
                           _ms(t.e2e_ms.p99))
        if result.stopped:
            stages.caption = f"sweep stopped: {result.stopped}"
        parts.append(stages)
    return Group(*parts)


async def save(session: AsyncSession, shot: OneShot, result: RunResult) -> int:
    """Store the one-shot as a manual run of a disabled probe (created on first use)."""
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
               "slo_e2e_ms": shot.slo.e2e_ms}
    probe = await crud.get_by_name(session, Probe, probe_name)
    if probe is None:
        probe = await crud.create(session, Probe, {
            "name": probe_name, "interval_seconds": 3600, "jitter_seconds": 0.0,
            "enabled": False, "labels": {"source": "cli"}, **columns}, "probe")
    else:
        probe = await crud.update(session, probe, columns, "probe")
    run = await run_queries.create_manual(session, probe.id)
    run.started_at = min((s.sent_at for s in result.samples), default=None)
    await session.flush()
    rows = [sample_tuple(run.id, pos, probe.id, sample)
            for pos, sample in enumerate(result.samples)]
    final = completed(RunFinal(run_id=run.id, probe_id=probe.id,
                               scheduled_for=run.scheduled_for, status="failed"), result)
    connection = await session.connection()
    await partitions.ensure(connection, {partitions.utc_day(sent_at(row)) for row in rows})
    await store(connection, rows, [final])
    return run.id
