"""The `sustain` command."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
import uvloop
from pydantic import SecretStr, ValidationError
from rich.console import Console
from rich.live import Live
from rich.table import Table

from sustain.service import strict_json
from sustain.service.config import Settings
from sustain.service.db.embedded import DataDirInUseError, EmbeddedPostgres
from sustain.service.db.engine import create_engine, safe_url, session_factory
from sustain.service.db.migrate import upgrade_to_head
from sustain.service.logging import configure_logging

if TYPE_CHECKING:  # imported where used, so that `sustain --help` stays fast
    from sustain.probes.runner import RunResult
    from sustain.service.evaluation.rules import SloRules
    from sustain.service.export.samples import ExportRequest
    from sustain.service.oneshot import OneShot
    from sustain.service.probe_flags import ProbeFlags
    from sustain.service.schemas.compare import Comparison

app = typer.Typer(
    help="sustain: continuous monitoring of LLM inference endpoints.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
console = Console(stderr=True, soft_wrap=True)

HostOpt = Annotated[str | None, typer.Option(help="Bind address (env SUSTAIN_HOST).")]
PortOpt = Annotated[int | None, typer.Option(help="Bind port (env SUSTAIN_PORT).")]
DbOpt = Annotated[str | None, typer.Option(
    "--database-url", help="PostgreSQL URL; unset: embedded (env SUSTAIN_DATABASE_URL).")]
DataDirOpt = Annotated[Path | None, typer.Option(help="Data directory (env SUSTAIN_DATA_DIR).")]
LogLevelOpt = Annotated[str | None, typer.Option(help="debug|info|warning|error.")]
LogFormatOpt = Annotated[str | None, typer.Option(help="text|json.")]


def load_settings(**overrides: Any) -> Settings:
    """Environment first, then the flags that were given."""
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        for error in exc.errors():
            field = ".".join(str(p) for p in error["loc"])
            console.print(f"[red]invalid setting SUSTAIN_{field.upper()}: {error['msg']}[/red]")
        raise typer.Exit(2) from None


def _terminate(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001 - signal handler
    raise SystemExit(0)


@contextmanager
def database(settings: Settings) -> Iterator[str]:
    """The configured database, or an embedded one that lives as long as this block.

    SIGTERM becomes SystemExit so the embedded server is stopped on the way out (uvicorn
    re-raises the signal it caught after its own graceful shutdown).
    """
    signal.signal(signal.SIGTERM, _terminate)
    if settings.database_url is not None:
        yield settings.database_url
        return
    embedded = EmbeddedPostgres(settings.data_dir)
    try:
        url = embedded.start()
    except DataDirInUseError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut the stop short
            signal.signal(sig, signal.SIG_IGN)
        embedded.stop()


def _serve(settings: Settings, url: str) -> None:
    from sustain.service.app import create_app
    from sustain.service.http_protocol import guarded_config
    from sustain.service.server import GracefulServer

    app = create_app(settings, url)
    server = GracefulServer(guarded_config(
        app, settings, host=settings.host, port=settings.port,
        log_config=None, access_log=False, timeout_graceful_shutdown=10,
    ), app)
    with suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        raise typer.Exit(1)


ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", help="YAML config file synced to the database (env SUSTAIN_CONFIG).")]


def _check_config(path: Path, settings: Settings) -> bool:
    """Print every problem of the file (file:line: field: message), probe profiles beyond the
    load limits of `settings` and what its secret, dataset, egress and `${NAME}` expansion
    (SUSTAIN_CONFIG_ENV) policies refuse included; whether it is valid."""
    from sustain.service.config_file.load import read
    from sustain.service.config_file.yaml_lines import ConfigError

    try:
        config, _ = read(path, limits=settings.load_limits(), reach=settings.reach(),
                         expandable=settings.config_expansion())
    except ConfigError as exc:
        for line in exc.lines():
            console.print(line, markup=False, highlight=False)
        return False
    console.print(f"{path}: ok ({len(config.endpoints)} endpoints, {len(config.workloads)} "
                  f"workloads, {len(config.probes)} probes, {len(config.slos)} SLOs, "
                  f"{len(config.notifiers)} notifiers)", markup=False, highlight=False)
    return True


@app.command()
def serve(host: HostOpt = None, port: PortOpt = None, database_url: DbOpt = None,
          data_dir: DataDirOpt = None, log_level: LogLevelOpt = None,
          log_format: LogFormatOpt = None, config: ConfigOpt = None) -> None:
    """Run the service: API, scheduler, metrics. Embedded PostgreSQL unless a URL is set.
    SIGTERM drains (runs in flight may finish within SUSTAIN_SHUTDOWN_GRACE_SECONDS)."""
    settings = load_settings(host=host, port=port, database_url=database_url,
                             data_dir=data_dir, log_level=log_level, log_format=log_format,
                             config=config)
    configure_logging(settings.log_level, settings.log_format)
    _check_anonymous_read(settings)
    if settings.config is not None and not _check_config(settings.config, settings):
        raise typer.Exit(2)
    with database(settings) as url:
        _serve(settings, url)


def _check_anonymous_read(settings: Settings) -> None:
    """Refuse to serve anonymous reads beyond loopback unless asked for in so many words;
    warn when asked."""
    import logging

    from sustain.service.domain.exposure import (
        ANONYMOUS_READ_VAR,
        anonymous_read_explicit,
        anonymous_read_exposure,
    )

    exposure = anonymous_read_exposure(settings.host, settings.anonymous_read,
                                       anonymous_read_explicit(os.environ))
    if exposure == "refused":
        console.print(f"[red]--host {settings.host!r} is reachable from other machines and "
                      f"anonymous reads are on: anyone who can connect would read every "
                      f"endpoint, probe, run and alert without a key. Set {ANONYMOUS_READ_VAR}"
                      f"=true to mean it, or bind loopback (127.0.0.1), or unset "
                      f"{ANONYMOUS_READ_VAR}[/red]", highlight=False)
        raise typer.Exit(2)
    if exposure == "network":
        logging.getLogger("sustain.service.cli").warning(
            "%s=true on %s, which other machines can reach: anyone who can connect reads "
            "every endpoint, probe, run and alert without a key", ANONYMOUS_READ_VAR,
            settings.host)


async def _slo_rules_from_database(url: str) -> list[SloRules]:
    from sqlalchemy import select

    from sustain.service.db.models import Slo
    from sustain.service.db.slos import tiers_of
    from sustain.service.evaluation.rules import SloRules

    engine = create_engine(url, pool_size=1)
    try:
        async with session_factory(engine)() as session:
            rows = (await session.execute(select(Slo).order_by(Slo.name))).scalars().all()
            return [SloRules(s.name, s.objective, tiers_of(s), s.description) for s in rows]
    finally:
        await engine.dispose()


@app.command()
def rules(config: ConfigOpt = None, database_url: DbOpt = None,
          data_dir: DataDirOpt = None) -> None:
    """Print Prometheus recording and alerting rules for the SLOs (of the config file, else
    of the database): multi-window, multi-burn-rate over sustain_slo_events_total."""
    import yaml

    from sustain.service.config_file.load import read
    from sustain.service.config_file.yaml_lines import ConfigError
    from sustain.service.evaluation.rules import SloRules, rules_document

    settings = load_settings(database_url=database_url, data_dir=data_dir)
    if config is not None:
        try:
            parsed, _ = read(config, expandable=settings.config_expansion())
        except ConfigError as exc:
            for line in exc.lines():
                console.print(line, markup=False, highlight=False)
            raise typer.Exit(2) from None
        slos = [SloRules(s.name, s.objective, s.tiers, s.description) for s in parsed.slos]
    else:
        with database(settings) as url:
            slos = asyncio.run(_slo_rules_from_database(url))
    sys.stdout.write(yaml.safe_dump(rules_document(slos), sort_keys=False, width=1000))


@app.command()
def validate(path: Annotated[Path, typer.Argument(help="The YAML config file.")]) -> None:
    """Check a config file: every problem with its line; exit 1 if there is any. Probe
    profiles, secret references, datasets, URLs and `${NAME}` expansions are checked against
    this environment's SUSTAIN_* settings (SUSTAIN_MAX_RATE, SUSTAIN_SECRET_ENV,
    SUSTAIN_CONFIG_ENV, ...), so run it with the service's."""
    if not _check_config(path, load_settings()):
        raise typer.Exit(1)


@app.command()
def migrate(database_url: DbOpt = None, data_dir: DataDirOpt = None) -> None:
    """Upgrade the database schema to the newest revision."""
    settings = load_settings(database_url=database_url, data_dir=data_dir)
    configure_logging(settings.log_level, settings.log_format)
    with database(settings) as url:
        upgrade_to_head(url)
    console.print(f"database {safe_url(url)} is at the newest revision")


async def _seed_demo(url: str, simulator_url: str) -> None:
    from sustain.service.demo import ensure_demo_objects

    engine = create_engine(url, pool_size=1)
    try:
        async with session_factory(engine).begin() as session:
            await ensure_demo_objects(session, simulator_url)
    finally:
        await engine.dispose()


def _loopback(host: str) -> bool:
    """Whether a bind address only accepts connections from this machine."""
    from sustain.service.domain.exposure import is_loopback

    return is_loopback(host)


@app.command()
def demo(host: HostOpt = None, port: PortOpt = None, database_url: DbOpt = None,
         data_dir: DataDirOpt = None, log_level: LogLevelOpt = None,
         log_format: LogFormatOpt = None) -> None:
    """Embedded PostgreSQL + built-in simulator + a demo probe, served on HOST:PORT."""
    from sustain.service.demo import DEMO_BATCH
    from sustain.service.domain.keys import generate_key
    from sustain.simulator.config import SimulatorConfig
    from sustain.simulator.server import BackgroundSimulator

    settings = load_settings(host=host, port=port, database_url=database_url,
                             data_dir=data_dir, log_level=log_level, log_format=log_format)
    if not _loopback(settings.host):
        console.print(f"[red]--host: the demo lets anyone read without a key, so it binds "
                      f"loopback only (127.0.0.1 or ::1), not {settings.host!r}; use "
                      "`sustain serve` to serve others[/red]")
        raise typer.Exit(2)
    generated = settings.admin_key is None
    admin_key = generate_key() if generated else settings.admin_key.get_secret_value()  # type: ignore[union-attr]
    settings = settings.model_copy(update={"anonymous_read": True,
                                           "admin_key": SecretStr(admin_key)})
    configure_logging(settings.log_level, settings.log_format)
    with database(settings) as url, \
            BackgroundSimulator(SimulatorConfig(max_batch=DEMO_BATCH)) as simulator:
        upgrade_to_head(url)
        asyncio.run(_seed_demo(url, simulator.base_url))
        base = f"http://{settings.host}:{settings.port}"
        console.print(
            f"[bold]sustain demo[/bold]: probe 'demo-constant' (2 req/s for 5 s, every 15 s, "
            f"under the SLO 'demo-availability') and 'demo-capacity' (the highest concurrency "
            f"with TTFT p99 <= 200 ms, every 2 min) against the simulator at "
            f"{simulator.base_url} ({DEMO_BATCH} generations at once)\n"
            f"  status page {base}/\n"
            f"  API docs    {base}/docs\n"
            f"  metrics     {base}/metrics\n"
            f"  latest run  {base}/api/v1/runs?limit=1\n"
            "Reads need no key here (loopback only); writes need the admin key"
            + (" (SUSTAIN_ADMIN_KEY)." if not generated else
               f", new for this run:\n  {admin_key}\n"
               f"  e.g. curl -H 'Authorization: Bearer {admin_key}' {base}/api/v1/keys")
            + "\nPress Ctrl-C to stop."
        )
        _serve(settings, url)


@app.command()
def probe(
    base_url: Annotated[str, typer.Argument(
        help="OpenAI-style base URL, e.g. http://127.0.0.1:8001/v1.")],
    model: Annotated[str | None, typer.Option(
        help="Model name to request (required unless --api http).")] = None,
    api: Annotated[str, typer.Option(help="openai-chat | openai-completions | http.")]
    = "openai-chat",
    profile: Annotated[str, typer.Option(
        help="single | constant | poisson | concurrency | steps | sweep | trace | capacity | "
        "pareto.")] = "single",
    rate: Annotated[float | None, typer.Option(help="Requests/s (constant, poisson).")] = None,
    burstiness: Annotated[float, typer.Option(
        help="Poisson gamma shape; 1 = Poisson, < 1 burstier.")] = 1.0,
    concurrency: Annotated[int | None, typer.Option(help="Users (concurrency).")] = None,
    levels: Annotated[str | None, typer.Option(
        help="Comma-separated: rates for steps, user counts for sweep.")] = None,
    duration: Annotated[float | None, typer.Option(
        help="Seconds of measurement (per stage for steps and sweep). Default 10.")] = None,
    max_requests: Annotated[int | None, typer.Option(help="Cap on measured requests.")]
    = None,
    warmup: Annotated[float, typer.Option(help="Seconds of unmeasured warmup per stage.")]
    = 0.0,
    trace: Annotated[str | None, typer.Option(
        help="Replay this request trace at its own arrival times (implies --profile trace).")]
    = None,
    trace_format: Annotated[str, typer.Option(help="mooncake (JSONL) | azure (CSV).")]
    = "mooncake",
    speedup: Annotated[float, typer.Option(help="Replay the trace this many times faster.")]
    = 1.0,
    max_concurrency: Annotated[int | None, typer.Option(
        help="capacity: the highest level tried; pareto: C_max.")] = None,
    min_concurrency: Annotated[int, typer.Option(help="capacity: the first level.")] = 1,
    points: Annotated[int, typer.Option(help="pareto: concurrency points (>= 7 for MLPerf).")]
    = 7,
    slo_percentile: Annotated[float, typer.Option(
        help="capacity: the percentile the --slo-* thresholds hold (50, 90, 95, 99, 99.9).")]
    = 99,
    min_success: Annotated[float, typer.Option(
        help="capacity: the success ratio a level needs.")] = 0.99,
    min_samples: Annotated[int | None, typer.Option(
        help="capacity: a level runs on until it has this many requests.")] = None,
    workers: Annotated[int, typer.Option(
        help="Worker processes to spread the load over, each sending its share (about one "
        "per free core; 1 measures in this process).")] = 1,
    input_tokens: Annotated[int, typer.Option(help="Synthetic prompt length (words).")] = 32,
    output_tokens: Annotated[int, typer.Option(help="max_tokens per request.")] = 64,
    no_stream: Annotated[bool, typer.Option("--no-stream", help="Ask for whole responses.")]
    = False,
    allow_cache: Annotated[bool, typer.Option(
        "--allow-cache", help="Send the same prompts every run, so a prefix-caching server "
        "may serve them from its cache (default: a fresh salt per request keeps every "
        "prefill cold).")] = False,
    shared_prefix_tokens: Annotated[int, typer.Option(
        help="A stable shared prefix of this many tokens before the salt (a system prompt "
        "the cache may serve).")] = 0,
    dataset: Annotated[str | None, typer.Option(
        help="JSONL prompts, one request per line ({prompt} or {messages}, optional "
        "max_tokens), cycled in a seeded order.")] = None,
    sessions: Annotated[str | None, typer.Option(
        help="JSONL multi-turn sessions, one turn per line (conversation_id, turn, messages, "
        "optional tools, delay_seconds, max_tokens); users are conversations in flight.")]
    = None,
    turns: Annotated[int | None, typer.Option(
        help="Synthetic sessions: conversations of this many turns of --input-tokens each.")]
    = None,
    turn_delay: Annotated[float, typer.Option(
        help="Synthetic sessions: think time (s) before each turn after the first.")] = 0.0,
    session_header: Annotated[bool, typer.Option(
        "--session-header", help="Send each turn's conversation as X-Session-ID.")] = False,
    header: Annotated[list[str] | None, typer.Option(
        help="Extra request header NAME:VALUE (repeatable).")] = None,
    api_key_env: Annotated[str | None, typer.Option(
        help="Send `Authorization: Bearer $NAME`; the key itself is never printed.")] = None,
    slo_ttft_ms: Annotated[float | None, typer.Option(help="Goodput: TTFT threshold.")]
    = None,
    slo_tpot_ms: Annotated[float | None, typer.Option(help="Goodput: TPOT threshold.")]
    = None,
    slo_e2e_ms: Annotated[float | None, typer.Option(help="Goodput: E2E threshold.")] = None,
    http2: Annotated[bool, typer.Option("--http2", help="Offer HTTP/2 (https).")] = False,
    metrics_url: Annotated[str | None, typer.Option(
        help="The server's Prometheus metrics (e.g. http://vllm:8000/metrics), read during "
        "the run: queue, KV-cache use, prefix-cache hits, preemptions.")] = None,
    metrics_interval: Annotated[float, typer.Option(
        help="Seconds between reads of --metrics-url.")] = 1.0,
    accelerator: Annotated[str | None, typer.Option(
        help="What serves the endpoint, e.g. H100-80GB (for the report).")] = None,
    accelerators: Annotated[int | None, typer.Option(
        help="Accelerators serving the endpoint, every role counted: tok/s per accelerator.")]
    = None,
    price_per_hour: Annotated[float | None, typer.Option(
        help="The deployment's price per hour: cost per million output and good tokens.")]
    = None,
    currency: Annotated[str, typer.Option(help="Of --price-per-hour.")] = "USD",
    power_kw: Annotated[float | None, typer.Option(
        help="The deployment's power draw: tok/s per kW.")] = None,
    method: Annotated[str, typer.Option(help="--api http: request method.")] = "GET",
    expect_status: Annotated[int, typer.Option(help="--api http: expected status.")] = 200,
    expect_body: Annotated[str | None, typer.Option(
        help="--api http: text the response must contain.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON object only.")]
    = False,
    html: Annotated[Path | None, typer.Option(
        help="Also write the run as one self-contained HTML report (no script, no network) "
        "to this file.")] = None,
    save: Annotated[bool, typer.Option("--save", help="Store the result as a run.")] = False,
    database_url: DbOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Run one load profile against BASE_URL now and report: live progress, then a table
    (or --json). Exit status 1 when every request failed to reach the endpoint."""
    given = dict(locals())  # the parameters, by name: ProbeFlags has a field for each
    from sustain.probes.client.secrets import SecretUnavailableError, resolve_secret
    from sustain.probes.report import json_report
    from sustain.probes.report_tables import results
    from sustain.probes.workload.dataset import DatasetError
    from sustain.probes.workload.spec import WorkloadError
    from sustain.service import oneshot
    from sustain.service.probe_flags import FlagError, ProbeFlags

    limits = replace(load_settings().load_limits(), max_workers=None)  # --workers is yours
    try:
        flags = ProbeFlags.parse(given)
        shot = oneshot.build(flags, limits)
        if shot.endpoint.auth_secret_ref is not None:
            resolve_secret(shot.endpoint.auth_secret_ref, shot.secrets)
    except (FlagError, SecretUnavailableError) as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
    try:
        if flags.json_output:
            result = uvloop.run(oneshot.run_with_display(shot, None, budget=limits.budget()))
        else:
            with Live(console=console, refresh_per_second=4, transient=True) as display:
                result = uvloop.run(oneshot.run_with_display(shot, display,
                                                             budget=limits.budget()))
    except (DatasetError, WorkloadError) as exc:  # a file or workload that cannot be used
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
    if not flags.json_output:
        Console(width=None if sys.stdout.isatty() else 140).print(results(result))
    if flags.html is not None:
        _write_report(flags, result)
    run_id = None
    if flags.save:
        settings = load_settings(database_url=flags.database_url, data_dir=flags.data_dir)
        with database(settings) as url:
            upgrade_to_head(url)
            run_id = asyncio.run(_save(url, shot, result))
    if flags.json_output:
        report = json_report(result)
        if run_id is not None:
            report["run_id"] = run_id
        print(strict_json.dumps(report))
    elif run_id is not None:
        console.print(f"saved as run {run_id}")
    if oneshot.unreachable(result):
        console.print("[red]the endpoint was unreachable for every request[/red]")
        raise typer.Exit(1)


def _write_report(flags: ProbeFlags, result: RunResult) -> None:
    from sustain.probes.measure.sample import Outcome
    from sustain.service.web.report import render, run_page

    assert flags.html is not None
    ok = [s for s in result.samples if s.outcome is Outcome.SUCCESS]
    page = run_page(result.report().model_dump(mode="json"),
                    f"sustain probe: {flags.base_url}",
                    f"model {flags.model or '-'} · profile {flags.profile} · "
                    f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC",
                    [v for s in ok if (v := s.ttft_ms) is not None], [s.e2e_ms for s in ok])
    try:
        flags.html.write_text(render(page), encoding="utf-8")
    except OSError as exc:
        console.print(f"[red]--html: cannot write {flags.html} ({exc.strerror})[/red]")
        raise typer.Exit(2) from None


async def _save(url: str, shot: OneShot, result: RunResult) -> int:
    from sustain.service.oneshot import save

    engine = create_engine(url, pool_size=1)
    try:
        async with session_factory(engine).begin() as session:
            return await save(session, shot, result)
    finally:
        await engine.dispose()


@app.command()
def simulate(
    host: Annotated[str, typer.Option(help="Bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Bind port.")] = 8001,
    ttft_ms: Annotated[float, typer.Option(help="Time to first token, ms.")] = 50.0,
    itl_ms: Annotated[float, typer.Option(help="Inter-token latency, ms.")] = 10.0,
    output_tokens: Annotated[int, typer.Option(help="Tokens per response (max).")] = 32,
    model: Annotated[str, typer.Option(help="Model name to report.")] = "sim-model",
    fault: Annotated[str, typer.Option(help="Fault to inject into --fault-rate of requests.")]
    = "none",
    fault_rate: Annotated[float, typer.Option(help="Fraction of requests with --fault.")] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed for jitter and fault selection.")] = 0,
    prefill_ms_per_token: Annotated[float, typer.Option(
        help="Added to TTFT per prompt token not served from the prefix cache, ms.")] = 0.0,
    no_prefix_cache: Annotated[bool, typer.Option(
        "--no-prefix-cache", help="Do not emulate prefix caching (nor report cached_tokens).")]
    = False,
    ttft_sigma: Annotated[float, typer.Option(help="Lognormal jitter of TTFT (sigma).")] = 0.0,
    itl_sigma: Annotated[float, typer.Option(help="Lognormal jitter of ITL (sigma).")] = 0.0,
    max_batch: Annotated[int | None, typer.Option(
        help="Generations at once; more requests queue, so TTFT rises past saturation.")]
    = None,
    error_every: Annotated[int, typer.Option(help="Answer every Nth request with HTTP 500.")]
    = 0,
    truth_log: Annotated[Path | None, typer.Option(
        help="Append per-request server-side timings (JSON lines) to this file.")] = None,
    api_key_env: Annotated[str | None, typer.Option(
        help="Require `Authorization: Bearer <key>`, the key read from this env variable.")]
    = None,
) -> None:
    """Run the OpenAI-compatible simulator (http://HOST:PORT/v1)."""
    from sustain.simulator.config import Fault, SimulatorConfig
    from sustain.simulator.server import serve as serve_simulator

    try:
        chosen = Fault(fault)
    except ValueError:
        console.print(f"[red]--fault must be one of {', '.join(f.value for f in Fault)}[/red]")
        raise typer.Exit(2) from None
    problems = [
        "--fault-rate must be in [0, 1]" if not 0.0 <= fault_rate <= 1.0 else "",
        "--ttft-ms, --itl-ms, --output-tokens and --prefill-ms-per-token must be >= 0"
        if min(ttft_ms, itl_ms, output_tokens, prefill_ms_per_token) < 0 else "",
        "--ttft-sigma and --itl-sigma must be >= 0" if min(ttft_sigma, itl_sigma) < 0 else "",
        "--max-batch must be >= 1" if max_batch is not None and max_batch < 1 else "",
        "--error-every must be >= 0" if error_every < 0 else "",
    ]
    if any(problems):
        console.print("[red]" + "; ".join(p for p in problems if p) + "[/red]")
        raise typer.Exit(2)
    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            console.print(f"[red]--api-key-env: variable {api_key_env} is not set[/red]")
            raise typer.Exit(2)
    config = SimulatorConfig(ttft_ms=ttft_ms, itl_ms=itl_ms, output_tokens=output_tokens,
                             model=model, fault=chosen, fault_rate=fault_rate, seed=seed,
                             api_key=api_key, ttft_sigma=ttft_sigma, itl_sigma=itl_sigma,
                             max_batch=max_batch, error_every=error_every,
                             prefill_ms_per_token=prefill_ms_per_token,
                             prefix_cache=not no_prefix_cache,
                             truth_log=None if truth_log is None else str(truth_log))
    console.print(f"simulator on http://{host}:{port}/v1 (ttft {ttft_ms} ms, itl {itl_ms} ms)")
    serve_simulator(config, host, port)


def _moment(option: str, value: str) -> datetime:
    """ISO 8601; a time without an offset is UTC."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        console.print(f"[red]{option}: not an ISO 8601 time: {value!r}[/red]")
        raise typer.Exit(2) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def _export(url: str, request: ExportRequest, file_format: str, output: Path | None
                  ) -> int:
    from sustain.service.export.samples import export_samples

    engine = create_engine(url, pool_size=1)
    try:
        if file_format == "parquet":
            return await export_samples(engine, request, "parquet", path=output)
        if output is None:
            return await export_samples(engine, request, "csv", text_out=sys.stdout)
        with output.open("w", encoding="utf-8", newline="") as out:
            return await export_samples(engine, request, "csv", text_out=out)
    finally:
        await engine.dispose()


@app.command()
def export(
    probe_name: Annotated[str, typer.Option("--probe", help="Probe name.")],
    start: Annotated[str, typer.Option("--from", help="ISO 8601 time, inclusive (UTC if no "
                                                      "offset).")],
    end: Annotated[str | None, typer.Option("--to", help="ISO 8601 time, exclusive; "
                                                         "default now.")] = None,
    file_format: Annotated[str, typer.Option(
        "--format", help="csv | parquet (parquet needs the `parquet` extra).")] = "csv",
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="File to write; CSV goes to stdout without it.")] = None,
    database_url: DbOpt = None, data_dir: DataDirOpt = None,
) -> None:
    """Raw samples of one probe sent in [--from, --to), oldest first, as CSV or Parquet."""
    from sustain.service.export.parquet_file import ParquetUnavailableError
    from sustain.service.export.samples import ExportRequest, UnknownProbeError

    if file_format not in ("csv", "parquet"):
        console.print(f"[red]--format: must be csv or parquet, not {file_format!r}[/red]")
        raise typer.Exit(2)
    if file_format == "parquet" and output is None:
        console.print("[red]--output: required for parquet (a binary file)[/red]")
        raise typer.Exit(2)
    request = ExportRequest(probe=probe_name, start=_moment("--from", start),
                            end=_moment("--to", end) if end else datetime.now(UTC))
    if request.start >= request.end:
        console.print("[red]--from: must be before --to[/red]")
        raise typer.Exit(2)
    settings = load_settings(database_url=database_url, data_dir=data_dir)
    configure_logging(settings.log_level, settings.log_format)
    with database(settings) as url:
        try:
            count = asyncio.run(_export(url, request, file_format, output))
        except UnknownProbeError:
            console.print(f"[red]--probe: no probe named {probe_name!r}[/red]")
            raise typer.Exit(2) from None
        except ParquetUnavailableError as exc:
            console.print(f"[red]--format parquet: {exc}[/red]")
            raise typer.Exit(2) from None
    console.print(f"exported {count} samples of probe {probe_name!r}"
                  + (f" to {output}" if output else ""))


@app.command()
def compare(
    probes: Annotated[list[str], typer.Argument(help="Probe names (2 to 8).")],
    window: Annotated[str, typer.Option(help="How far back, e.g. 24h, 7d.")] = "7d",
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON object only.")]
    = False,
    database_url: DbOpt = None, data_dir: DataDirOpt = None,
) -> None:
    """Probes side by side over a window: availability, latency, throughput, capacity under
    SLO, efficiency, stability and drift (what GET /api/v1/compare answers)."""
    from sustain.service.errors import ServiceError
    from sustain.service.history.windows import parse_duration

    try:
        seconds = parse_duration(window)
    except ValueError as exc:
        console.print(f"[red]--window: {exc}[/red]")
        raise typer.Exit(2) from None
    settings = load_settings(database_url=database_url, data_dir=data_dir)
    configure_logging(settings.log_level, settings.log_format)
    with database(settings) as url:
        upgrade_to_head(url)
        try:
            found = asyncio.run(_compare(url, probes, seconds))
        except ServiceError as exc:
            console.print(f"[red]{exc}[/red]")
            raise typer.Exit(2) from None
    if json_output:
        print(strict_json.dumps(found.model_dump(mode="json", by_alias=True)))
        return
    Console(width=None if sys.stdout.isatty() else 160).print(comparison_table(found))


async def _compare(url: str, names: list[str], seconds: int) -> Comparison:
    from sustain.service.db.compare import compare as compare_probes

    engine = create_engine(url, pool_size=1)
    end = datetime.now(UTC)
    try:
        async with session_factory(engine)() as session:
            return await compare_probes(session, names, end - timedelta(seconds=seconds), end)
    finally:
        await engine.dispose()


def comparison_table(found: Comparison) -> Table:
    """One column per probe, one row per figure."""
    table = Table(title=f"{found.from_:%Y-%m-%d %H:%M} to {found.to:%Y-%m-%d %H:%M} UTC")
    table.add_column("")
    for probe in found.probes:
        table.add_column(f"{probe.probe}\n{probe.endpoint} · {probe.model}", justify="right")

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f} ms"

    def num(value: float | None, unit: str = "") -> str:
        return "-" if value is None else f"{value:,.2f}{unit}"

    rows: list[tuple[str, list[str]]] = [
        ("runs", [str(p.runs) for p in found.probes]),
        ("availability", ["-" if p.availability is None else f"{p.availability:.2%}"
                          for p in found.probes]),
        ("TTFT p50 / p99", [f"{ms(p.ttft_ms.p50)} / {ms(p.ttft_ms.p99)}"
                            for p in found.probes]),
        ("TPOT p50 / p99", [f"{ms(p.tpot_ms.p50)} / {ms(p.tpot_ms.p99)}"
                            for p in found.probes]),
        ("E2E p50 / p99", [f"{ms(p.e2e_ms.p50)} / {ms(p.e2e_ms.p99)}" for p in found.probes]),
        ("output tok/s", [num(p.output_token_throughput) for p in found.probes]),
        ("goodput req/s", [num(p.goodput) for p in found.probes]),
        ("capacity (newest, median)", [
            "-" if p.capacity is None else
            f"{p.capacity.latest} / {p.capacity.median:g} {p.capacity.unit or ''}"
            for p in found.probes]),
        ("cost per 1M good tokens", [
            num((p.efficiency or {}).get("cost_per_million_good_tokens"),
                f" {(p.efficiency or {}).get('currency', '')}") for p in found.probes]),
        ("TTFT p99 stability", [
            "-" if (s := p.stability.get("ttft_p99")) is None or s.cov is None
            else f"{s.cov:.1%} ({s.band})" for p in found.probes]),
        ("drift", [", ".join(f"{d.metric}:{d.stat} {d.verdict}" for d in p.drift
                             if d.verdict in ("regressed", "improved")) or "no change"
                   for p in found.probes]),
    ]
    for label, cells in rows:
        table.add_row(label, *cells)
    return table


keys_app = typer.Typer(help="API keys: create (shown once), list, revoke; generate a "
                            "SUSTAIN_ADMIN_KEY value.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")


async def _keys_call(url: str, action: str, **args: Any) -> Any:
    from sustain.service.db import keys as key_queries

    engine = create_engine(url, pool_size=1)
    try:
        async with session_factory(engine)() as session:
            if action == "create":
                created = await key_queries.create(session, args["name"], args["role"], "cli")
                await session.commit()
                return created
            if action == "revoke":
                row = await key_queries.revoke(session, args["key_id"], datetime.now(UTC))
                await session.commit()
                return key_queries.read(row)
            return [key_queries.read(k) for k in await key_queries.list_all(session)]
    finally:
        await engine.dispose()


def _keys(action: str, database_url: str | None, data_dir: Path | None, **args: Any) -> Any:
    from sustain.service.errors import ServiceError

    settings = load_settings(database_url=database_url, data_dir=data_dir)
    configure_logging(settings.log_level, settings.log_format)
    with database(settings) as url:
        upgrade_to_head(url)
        try:
            return asyncio.run(_keys_call(url, action, **args))
        except ServiceError as exc:
            console.print(f"[red]{exc}[/red]")
            raise typer.Exit(2) from None


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Option(help="What the key is for (unique among active keys).")],
    role: Annotated[str, typer.Option(help="viewer | editor | admin.")],
    database_url: DbOpt = None, data_dir: DataDirOpt = None,
) -> None:
    """Create a key and print it once (stdout); store it now, it cannot be shown again."""
    from sustain.service.domain.keys import Role
    from sustain.service.schemas.keys import KeyCreate

    try:
        body = KeyCreate(name=name, role=Role(role))
    except (ValueError, ValidationError):
        console.print("[red]--role: must be viewer, editor or admin; --name: 1-100 "
                      "printable characters[/red]")
        raise typer.Exit(2) from None
    created = _keys("create", database_url, data_dir, name=body.name, role=body.role)
    console.print(f"created key {created.id} {created.name!r} ({created.role.value}); it is "
                  "shown once, below:")
    print(created.key)


@keys_app.command("list")
def keys_list(database_url: DbOpt = None, data_dir: DataDirOpt = None,
              json_output: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Every key with its role, prefix and times; never the keys themselves."""
    from rich.table import Table

    found = _keys("list", database_url, data_dir)
    if json_output:
        print(strict_json.dumps([k.model_dump(mode="json") for k in found]))
        return
    table = Table("id", "name", "role", "prefix", "created", "last used", "revoked")
    for k in found:
        table.add_row(str(k.id), k.name, k.role.value, k.prefix,
                      f"{k.created_at:%Y-%m-%d %H:%M}",
                      f"{k.last_used_at:%Y-%m-%d %H:%M}" if k.last_used_at else "-",
                      f"{k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "-")
    Console(width=None if sys.stdout.isatty() else 140).print(table)


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[int, typer.Argument(help="The key's id (keys list).")],
                database_url: DbOpt = None, data_dir: DataDirOpt = None) -> None:
    """Revoke a key at once; its status-page sign-ins end too."""
    if not 1 <= key_id < 2**63:
        console.print("[red]KEY_ID: not a key id[/red]")
        raise typer.Exit(2)
    revoked = _keys("revoke", database_url, data_dir, key_id=key_id)
    console.print(f"revoked key {revoked.id} {revoked.name!r}")


@keys_app.command("generate")
def keys_generate() -> None:
    """Print a new random key for SUSTAIN_ADMIN_KEY (nothing is stored)."""
    from sustain.service.domain.keys import generate_key

    print(generate_key())
