"""`sustain serve` and `sustain demo`: the service, and the service with an embedded database,
the simulator and demo probes."""

from __future__ import annotations

import asyncio
import os

import typer
from pydantic import SecretStr

from sustain.service.cli.common import (
    ConfigOpt,
    DataDirOpt,
    DbOpt,
    HostOpt,
    LogFormatOpt,
    LogLevelOpt,
    PortOpt,
    check_config,
    console,
    database,
    load_settings,
    one_connection_engine,
    serve_app,
)
from sustain.service.config import Settings
from sustain.service.db.engine import session_factory
from sustain.service.db.migrate import upgrade_to_head
from sustain.service.logging import configure_logging


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
    if settings.config is not None and not check_config(settings.config, settings):
        raise typer.Exit(2)
    with database(settings) as url:
        serve_app(settings, url)


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


async def _seed_demo(url: str, simulator_url: str) -> None:
    from sustain.service.cli.demo import ensure_demo_objects

    async with one_connection_engine(url) as engine, session_factory(engine).begin() as session:
        await ensure_demo_objects(session, simulator_url)


def _loopback(host: str) -> bool:
    """Whether a bind address only accepts connections from this machine."""
    from sustain.service.domain.exposure import is_loopback

    return is_loopback(host)


def demo(host: HostOpt = None, port: PortOpt = None, database_url: DbOpt = None,
         data_dir: DataDirOpt = None, log_level: LogLevelOpt = None,
         log_format: LogFormatOpt = None) -> None:
    """Embedded PostgreSQL + built-in simulator + a demo probe, served on HOST:PORT."""
    from sustain.service.cli.demo import DEMO_BATCH
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
        serve_app(settings, url)
