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
        say_when_no_key_gets_in(settings, url)
        serve_app(settings, url)


NO_KEY_CHECK_TIMEOUT_S = 5.0
"""How long `serve` waits at start to learn whether any key exists, in seconds (a database that
cannot answer by then gets no word here: the service's own checks say why)."""
UNDEFINED_TABLE = "42P01"
"""PostgreSQL's SQLSTATE for a table that is not there: a new database migrated at start."""


def say_when_no_key_gets_in(settings: Settings, url: str) -> None:
    """Warn, in one line with both ways in, when nobody can get in: no SUSTAIN_ADMIN_KEY and
    no stored key a person can use, so every call that needs a key answers 401 and the
    sign-in at / accepts nothing (the sign-in page says the same)."""
    from sustain.service.db.first_key import NO_KEY_REMEDIES

    if settings.admin_key is not None or asyncio.run(_person_key_exists(url)) is not False:
        return
    logging.getLogger("sustain.service.cli").warning(
        "nobody can get in yet: SUSTAIN_ADMIN_KEY is not set and no API key exists, so every "
        "call that needs a key answers 401 and the sign-in at /login accepts nothing; %s",
        NO_KEY_REMEDIES)


async def _person_key_exists(url: str) -> bool | None:
    """Whether a key a person can use is stored (False too when the keys table is not there
    yet); None when the database cannot tell within NO_KEY_CHECK_TIMEOUT_S."""
    from sqlalchemy.exc import DBAPIError

    from sustain.service.db.first_key import person_key_exists

    try:
        async with (asyncio.timeout(NO_KEY_CHECK_TIMEOUT_S), one_connection_engine(url) as engine,
                    session_factory(engine)() as session):
            return await person_key_exists(session)
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) == UNDEFINED_TABLE:
            return False
        return None
    except Exception:  # noqa: BLE001 - a word at start never keeps the service from starting
        return None


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
                     moved: dict[str, str]) -> tuple[list[str], int | None]:
    """Seed the demo's objects; the user's endpoints that followed a moved simulator, and the
    id of the demo's constant probe (None when a person deleted it)."""
    from sustain.service.db import crud
    from sustain.service.db.models import Probe
    from sustain.service.demo.objects import DEMO_PROBE, ensure_demo_objects

    async with one_connection_engine(url) as engine, session_factory(engine).begin() as session:
        followed = await ensure_demo_objects(session, constant_url, capacity_url, moved)
        probe = await crud.get_by_name(session, Probe, DEMO_PROBE)
        return followed, None if probe is None else probe.id


def _url_host(host: str) -> str:
    """A bind address as a URL's host: an IPv6 literal in brackets."""
    return f"[{host}]" if ":" in host else host


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
    from sustain.service.demo.first_run import FirstRun
    from sustain.service.demo.objects import DEMO_PROBE, DEMO_SIMULATOR, demo_banner
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
    simulators = DemoSimulators(settings.data_dir, settings.port, simulator_port,
                                DEMO_SIMULATOR)
    first_run: FirstRun | None = None
    with database(settings) as url:
        try:
            simulators.start()
        except SimulatorPortError as exc:
            say(str(exc), "red")
            raise typer.Exit(2) from None
        try:
            upgrade_to_head(url)
            followed, probe_id = asyncio.run(_seed_demo(
                url, simulators.url("constant"), simulators.url("capacity"), simulators.moved))
            base = f"http://{_url_host(settings.host)}:{settings.port}"
            say(demo_banner(base, simulators.url("constant"), simulators.url("capacity"),
                            None if settings.database_url else url,
                            admin_key if generated else None, followed,
                            simulator=simulators.config))
            if probe_id is not None:  # a first result at once, not at the next tick
                first_run = FirstRun(settings.host, settings.port, admin_key, probe_id,
                                     DEMO_PROBE).start()
            serve_app(settings, url)
        finally:
            if first_run is not None:
                first_run.stop()
            simulators.stop()
