"""What every command shares: the console, common options, settings from the environment
and flags, the database (configured or embedded) and serving the app."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.service.config import Settings
from sustain.service.db.embedded import DataDirInUseError, EmbeddedPostgres
from sustain.service.db.engine import create_engine

console = Console(stderr=True, soft_wrap=True)
"""Messages go to stderr, so a command's stdout carries only its output (--json, keys)."""

HostOpt = Annotated[str | None, typer.Option(help="Bind address (env SUSTAIN_HOST).")]
PortOpt = Annotated[int | None, typer.Option(help="Bind port (env SUSTAIN_PORT).")]
DbOpt = Annotated[str | None, typer.Option(
    "--database-url", help="PostgreSQL URL; unset: embedded (env SUSTAIN_DATABASE_URL).")]
DataDirOpt = Annotated[Path | None, typer.Option(help="Data directory (env SUSTAIN_DATA_DIR).")]
LogLevelOpt = Annotated[str | None, typer.Option(help="debug|info|warning|error.")]
LogFormatOpt = Annotated[str | None, typer.Option(help="text|json.")]

ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", help="YAML config file synced to the database (env SUSTAIN_CONFIG).")]

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


@asynccontextmanager
async def one_connection_engine(url: str) -> AsyncIterator[AsyncEngine]:
    """An engine with one pooled connection, for a command's few statements; disposed after."""
    engine = create_engine(url, pool_size=1)
    try:
        yield engine
    finally:
        await engine.dispose()


def serve_app(settings: Settings, url: str) -> None:
    """Serve the app on settings.host:port until SIGTERM or Ctrl-C (graceful)."""
    from sustain.service.app import create_app
    from sustain.service.cli.server import GracefulServer
    from sustain.service.http_protocol import guarded_config

    app = create_app(settings, url)
    server = GracefulServer(guarded_config(
        app, settings, host=settings.host, port=settings.port,
        log_config=None, access_log=False, timeout_graceful_shutdown=10,
    ), app)
    with suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        raise typer.Exit(1)


def check_config(path: Path, settings: Settings) -> bool:
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
    counts = ", ".join(counted(len(items), word) for items, word in (
        (config.endpoints, "endpoint"), (config.workloads, "workload"),
        (config.probes, "probe"), (config.slos, "SLO"), (config.notifiers, "notifier")))
    console.print(f"{path}: ok ({counts})", markup=False, highlight=False)
    return True


def counted(n: int, word: str) -> str:
    """`1 probe`, `2 probes`, `0 SLOs`: a count with its noun in the right number."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"
