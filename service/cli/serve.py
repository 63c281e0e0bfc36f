"""`sustain serve` and `sustain demo`: the service, and the service with an embedded database,
the simulator and demo probes."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Annotated

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
    database,
    load_settings,
    one_connection_engine,
    say,
    serve_app,
    warn_deprecated_variables,
)
from sustain.service.config import Settings
from sustain.service.db.engine import session_factory
from sustain.service.db.migrate import upgrade_to_head
from sustain.service.logging import configure_logging


def serve(host: HostOpt = None, port: PortOpt = None, database_url: DbOpt = None,
          data_dir: DataDirOpt = None, log_level: LogLevelOpt = None,
          log_format: LogFormatOpt = None, config: ConfigOpt = None) -> None:
    """Run the service: API, scheduler, metrics. Embedded PostgreSQL unless a URL is set.
    SIGTERM drains (runs in flight may finish within SUSTAIN_SHUTDOWN_GRACE_S)."""
    settings = load_settings(host=host, port=port, database_url=database_url,
                             data_dir=data_dir, log_level=log_level, log_format=log_format,
                             config=config)
    configure_logging(settings.log_level, settings.log_format)
    warn_deprecated_variables()
    _check_anonymous_read(settings)
    if settings.config is not None and not check_config(settings.config, settings):
        raise typer.Exit(2)
    with database(settings) as url:
        serve_app(settings, url)


def _check_anonymous_read(settings: Settings) -> None:
    """Refuse to serve anonymous reads beyond loopback unless asked for in so many words;
    warn when asked."""
    from sustain.service.access.exposure import (
        ANONYMOUS_READ_VAR,
        anonymous_read_explicit,
        anonymous_read_exposure,
    )

    exposure = anonymous_read_exposure(settings.host, settings.anonymous_read,
                                       anonymous_read_explicit(os.environ))
    if exposure == "refused":
        say(f"--host {settings.host!r} is reachable from other machines and anonymous reads "
            f"are on: anyone who can connect would read every endpoint, probe, run and alert "
            f"without a key. Set {ANONYMOUS_READ_VAR}=true to mean it, or bind loopback "
            f"(127.0.0.1), or unset {ANONYMOUS_READ_VAR}", "red")
        raise typer.Exit(2)
    if exposure == "network":
        logging.getLogger("sustain.service.cli").warning(
            "%s=true on %s, which other machines can reach: anyone who can connect reads "
            "every endpoint, probe, run and alert without a key (by the Host names "
            "SUSTAIN_ALLOWED_HOSTS lists; when it lists none, only by loopback names such as "
            "localhost)", ANONYMOUS_READ_VAR, settings.host)


async def _seed_demo(url: str, constant_url: str, capacity_url: str,
                     moved: dict[str, str]) -> list[str]:
    from sustain.service.demo.objects import ensure_demo_objects

    async with one_connection_engine(url) as engine, session_factory(engine).begin() as session:
        return await ensure_demo_objects(session, constant_url, capacity_url, moved)


def _loopback(host: str) -> bool:
    """Whether a bind address only accepts connections from this machine."""
    from sustain.service.access.exposure import is_loopback

    return is_loopback(host)


SimulatorPortOpt = Annotated[int | None, typer.Option(
    "--simulator-port", envvar="SUSTAIN_DEMO_SIMULATOR_PORT", min=1, max=65_534,
    help="Port of the demo probe's simulator; the capacity probe's takes the next one. "
    "Default: the ports of the previous start, else the service's port + 1 and + 2.")]


def demo(host: HostOpt = None, port: PortOpt = None, database_url: DbOpt = None,
         data_dir: DataDirOpt = None, log_level: LogLevelOpt = None,
         log_format: LogFormatOpt = None, simulator_port: SimulatorPortOpt = None) -> None:
    """Embedded PostgreSQL + two built-in simulators + demo probes, served on HOST:PORT."""
    from sustain.service.access.keys import generate_key
    from sustain.service.demo.objects import DEMO_BATCH, demo_banner
    from sustain.service.demo.simulators import DemoSimulators, SimulatorPortError

    settings = load_settings(host=host, port=port, database_url=database_url,
                             data_dir=data_dir, log_level=log_level, log_format=log_format)
    if not _loopback(settings.host):
        say(f"--host: the demo lets anyone read without a key, so it binds loopback only "
            f"(127.0.0.1 or ::1), not {settings.host!r}; use `sustain serve` to serve others",
            "red")
        raise typer.Exit(2)
    generated = settings.admin_key is None
    admin_key = generate_key() if generated else settings.admin_key.get_secret_value()  # type: ignore[union-attr]
    settings = settings.model_copy(update={"anonymous_read": True,
                                           "admin_key": SecretStr(admin_key)})
    configure_logging(settings.log_level, settings.log_format)
    warn_deprecated_variables()
    if settings.log_level.upper() != "DEBUG":  # a newcomer's screen: no migration log
        logging.getLogger("alembic").setLevel(logging.WARNING)
    simulators = DemoSimulators(settings.data_dir, settings.port, simulator_port, DEMO_BATCH)
    with database(settings) as url:
        try:
            simulators.start()
        except SimulatorPortError as exc:
            say(str(exc), "red")
            raise typer.Exit(2) from None
        try:
            upgrade_to_head(url)
            followed = asyncio.run(_seed_demo(url, simulators.url("constant"),
                                              simulators.url("capacity"), simulators.moved))
            say(demo_banner(
                f"http://{settings.host}:{settings.port}", simulators.url("constant"),
                simulators.url("capacity"), None if settings.database_url else url,
                admin_key if generated else None, followed))
            serve_app(settings, url)
        finally:
            simulators.stop()
